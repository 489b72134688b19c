import json
from datetime import UTC, datetime

import pytest

from memstream import MessageRecorded, TurnCompleted
from memstream.cli.importer import parse_import_lines
from memstream.errors import ImportFileError

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def parse(*rows: object, max_chars: int = 100) -> list:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    return parse_import_lines(
        lines, embedding_model="m@1", max_chars=max_chars, default_importance=0.5, now=NOW
    )


TURN = {"tenant": "acme", "thread": "t1", "query": "q", "answer": "a"}
MESSAGE = {"tenant": "acme", "thread": "t1", "content": "c", "speaker": "Ana"}


def test_turns_and_messages_become_events() -> None:
    turn, message = parse(
        {**TURN, "ts": "2026-11-02T09:30:00+02:00", "metadata": {"k": "v"}}, MESSAGE
    )
    assert isinstance(turn, TurnCompleted) and isinstance(message, MessageRecorded)
    assert turn.recorded_at == datetime(2026, 11, 2, 7, 30, tzinfo=UTC)
    assert turn.metadata == {"k": "v"}
    assert message.recorded_at == NOW and message.speaker == "Ana"
    assert turn.importance == 0.5 and turn.embedding_model == "m@1"


def test_a_time_without_zone_is_utc() -> None:
    (event,) = parse({**TURN, "ts": "2026-11-02T09:30:00"})
    assert event.recorded_at == datetime(2026, 11, 2, 9, 30, tzinfo=UTC)


def test_importing_the_same_lines_again_gives_the_same_ids() -> None:
    rows = [{**TURN, "ts": "2026-11-02T09:30:00Z"}, MESSAGE, TURN]
    first = parse(*rows)
    later = parse_import_lines(
        [json.dumps(r) for r in rows],
        embedding_model="m@1",
        max_chars=100,
        default_importance=0.5,
        now=datetime(2027, 1, 1, tzinfo=UTC),
    )
    assert [e.id for e in first] == [e.id for e in later]
    assert len({e.id for e in first}) == 3


def test_the_same_words_at_other_times_are_other_memories() -> None:
    (first,) = parse({**MESSAGE, "ts": "2026-11-02T09:30:00Z"})
    (second,) = parse({**MESSAGE, "ts": "2026-11-03T09:30:00Z"})
    assert first.id != second.id


def test_blank_lines_are_skipped() -> None:
    assert len(parse(TURN, "", "   ", MESSAGE)) == 2


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("{not json", "not valid JSON"),
        ("[1]", "must be a JSON object"),
        ({"thread": "t", "content": "c"}, "needs 'tenant'"),
        ({"tenant": "acme", "thread": "t", "query": "q"}, "needs 'answer'"),
        ({**MESSAGE, "content": ""}, "'content' must be non-empty text"),
        ({**MESSAGE, "content": "   "}, "'content' must be non-empty text"),
        ({**MESSAGE, "tenant": ""}, "tenant id is empty"),
        ({**MESSAGE, "tenant": "a\x00"}, "U\\+0000"),
        ({**MESSAGE, "ts": "yesterday"}, "not ISO-8601"),
        ({**MESSAGE, "metadata": {"n": 1}}, "strings to strings"),
        ({**MESSAGE, "importance": 3}, "from 0 to 1"),
        ({**MESSAGE, "contents": "typo"}, "unknown field 'contents'"),
        ({**MESSAGE, "content": "x" * 101}, "101 characters"),
    ],
)
def test_a_bad_line_stops_the_import_naming_its_number(bad: object, says: str) -> None:
    with pytest.raises(ImportFileError, match=f"^line 3: .*{says}") as caught:
        parse(TURN, MESSAGE, bad, TURN)
    assert caught.value.line == 3
    assert "Nothing was imported" in str(caught.value)
