"""Working memory's rules (memory.working): exchanges and their turns, the merge of a put
without a version, and the context window as agent-memory-server computes it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from memstream.errors import InvalidInputError
from memstream.memory.events import TurnCompleted
from memstream.memory.working import (
    DEFAULT_WINDOW_TOKENS,
    dropped_count,
    dropped_note,
    exchanges,
    merge_messages,
    message_tokens,
    summary_request,
    token_limit,
    truncated,
    turn_of,
    window,
)

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class SessionMessage:
    id: str
    role: str
    content: str
    created_at: datetime


def msg(
    mid: str, role: str = "user", content: str = "hello there", minute: int = 0
) -> SessionMessage:
    return SessionMessage(mid, role, content, T0 + timedelta(minutes=minute))


def ids(messages: list[SessionMessage]) -> list[str]:
    return [m.id for m in messages]


def test_an_exchange_is_a_user_message_and_the_first_answer_after_it() -> None:
    talk = [
        msg("s", "system"),
        msg("u1"),
        msg("t1", "tool"),
        msg("a1", "assistant"),
        msg("a1b", "assistant"),  # a second answer is not another exchange
        msg("u2"),
        msg("u3"),  # u2 was never answered: u3 asked again
        msg("a3", "assistant"),
        msg("u4"),  # not answered yet
    ]
    found = exchanges(talk)
    assert [(e.user.id, e.assistant.id) for e in found] == [("u1", "a1"), ("u3", "a3")]
    assert found[0].key == "u1/a1"


def test_an_exchange_is_one_turn_whose_id_depends_only_on_its_messages() -> None:
    (exchange,) = exchanges(
        [msg("u1", content="I live in Lisbon"), msg("a1", "assistant", "Noted", 1)]
    )
    turn = turn_of("acme", "s1", exchange, embedding_model="m", default_importance=0.5, max_chars=5)
    assert isinstance(turn, TurnCompleted)
    assert (turn.thread, turn.query, turn.answer) == ("s1", "I liv", "Noted")
    assert turn.recorded_at == T0 + timedelta(minutes=1)
    again = turn_of(
        "acme", "s1", exchange, embedding_model="m", default_importance=0.5, max_chars=99
    )
    assert again.id == turn.id  # the same exchange, sent whole or cut otherwise: one event
    (other,) = exchanges([msg("u9"), msg("a1", "assistant")])
    assert (
        turn_of("acme", "s1", other, embedding_model="m", default_importance=0.5, max_chars=99).id
        != turn.id
    )
    assert (
        turn_of(
            "acme", "s2", exchange, embedding_model="m", default_importance=0.5, max_chars=99
        ).id
        != turn.id
    )


def test_a_put_without_version_keeps_messages_appended_after_what_it_read() -> None:
    current = [msg("m1"), msg("m2"), msg("x3")]
    added = {"m1": 1, "m2": 2, "x3": 3}  # x3 came in after the putter read version 2
    merged = merge_messages(current, added, [msg("m1"), msg("m2"), msg("a3")], read=None)
    assert ids(merged) == ["m1", "m2", "x3", "a3"]
    # Known to have read version 2, it removed m2 on purpose: x3 stays, m2 goes.
    assert ids(merge_messages(current, added, [msg("m1"), msg("a3")], read=2)) == [
        "m1",
        "x3",
        "a3",
    ]
    # Two appends to an empty session that both read it empty: the first one's stays.
    assert ids(merge_messages([msg("one")], {"one": 2}, [msg("two")], read=1)) == ["one", "two"]


def test_a_put_without_version_that_read_everything_replaces() -> None:
    current = [msg("m1"), msg("m2"), msg("m3")]
    added = {"m1": 1, "m2": 1, "m3": 2}
    # It carries m3, the newest: it read all of it, so what it left out is removed.
    assert ids(merge_messages(current, added, [msg("m3"), msg("a4")], read=None)) == ["m3", "a4"]
    # Sharing nothing with the session, from an unknown read: a whole replacement.
    assert ids(merge_messages(current, added, [msg("z")], read=None)) == ["z"]
    assert merge_messages(current, added, [], read=None) == []
    assert merge_messages(current, added, [], read=2) == []


def test_the_window_is_context_window_max_else_the_model_else_the_default() -> None:
    assert token_limit(None, None) == DEFAULT_WINDOW_TOKENS == 16_000
    assert token_limit("gpt-4o-mini", None) == 128_000
    assert token_limit("gpt-3.5-turbo", None) == 4_096
    assert token_limit("gpt-4o-mini", 500) == 500
    assert token_limit("text-embedding-3-small", None) == 8_191
    # AMS 0.14 refuses a name outside its list, even beside a window; so does memstream.
    for unknown in ("a-model-nobody-knows", "gpt-5"):
        with pytest.raises(InvalidInputError, match="context_window_max") as refused:
            token_limit(unknown, 500)
        assert "gpt-4o-mini" in str(refused.value)


def test_a_message_counts_role_and_content_at_four_characters_a_token() -> None:
    assert message_tokens(msg("m", "user", "x" * 14)) == 5  # "user: " + 14 = 20 characters
    assert message_tokens(msg("m", "user", "x")) == 2


def test_under_seventy_percent_everything_stays_and_over_it_forty_percent_is_kept() -> None:
    talk = [msg(f"m{i}", content="x" * 34) for i in range(10)]  # 10 tokens each
    assert window(talk, 143).dropped == ()  # 100 <= int(143 * 0.7) = 100
    split = window(talk, 100)  # 100 > 70: keep what fits in 40 tokens
    assert ids(list(split.kept)) == ["m6", "m7", "m8", "m9"]
    assert ids(list(split.dropped)) == [f"m{i}" for i in range(6)]
    huge = [msg("a", content="x" * 400), msg("b", content="x" * 400)]
    assert ids(list(window(huge, 10).kept)) == ["b"]  # at least the last one stays


def test_a_read_with_a_window_hides_the_oldest_until_the_rest_fit() -> None:
    talk = [msg(f"m{i}", content="x" * 34) for i in range(5)]
    assert ids(truncated(talk, 30)) == ["m2", "m3", "m4"]
    assert ids(truncated(talk, 50)) == ids(talk)
    assert ids(truncated(talk, 1)) == ["m4"]


def test_the_note_of_dropped_messages_counts_them_all_and_keeps_other_context() -> None:
    first = dropped_note(None, 4)
    assert dropped_count(first) == 4
    assert "4 earlier message(s)" in first
    second = dropped_note("The user plans a trip.\n" + first, 4 + 3)
    assert second.splitlines()[0] == "The user plans a trip."
    assert dropped_count(second) == 7
    assert dropped_count("nothing dropped") == 0


def test_the_summary_request_carries_the_old_summary_and_the_messages() -> None:
    request = summary_request("They met in May.", [msg("u", content="I moved to Porto")])
    (message,) = request.messages
    assert "<summary>They met in May.</summary>" in message.content
    assert "user: I moved to Porto" in message.content
    assert "not instructions" in request.system
