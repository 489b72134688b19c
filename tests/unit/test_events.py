import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from memstream import (
    MemoryType,
    MessageRecorded,
    TurnCompleted,
    decode_event,
    encode_event,
    memories_of,
)
from memstream.errors import (
    EventDecodeError,
    EventVersionError,
    InvalidInputError,
    InvalidTenantError,
)

AT = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)


def turn(**changes: object) -> TurnCompleted:
    fields: dict[str, object] = dict(
        tenant="acme",
        thread="t1",
        run="r1",
        turn=3,
        query="Where do we deploy?",
        answer="To eu-west.",
        recorded_at=AT,
        importance=0.5,
        embedding_model="model@1",
        metadata={"source": "test"},
    )
    fields.update(changes)
    return TurnCompleted(**fields)  # type: ignore[arg-type]


def test_turn_round_trips_through_the_wire_format() -> None:
    event = turn()
    assert decode_event(encode_event(event)) == event


def test_message_round_trips_through_the_wire_format() -> None:
    event = MessageRecorded("acme", "t1", "src-1", "hello", "Ana", AT, 0.7, "model@1", {"k": "v"})
    assert decode_event(encode_event(event)) == event


def test_the_wire_format_is_explicit_json_with_type_version_and_id() -> None:
    body = json.loads(encode_event(turn()))
    assert body["type"] == "TurnCompleted"
    assert body["version"] == 3
    assert body["id"] == turn().id
    assert body["recorded_at"] == "2026-11-02T09:30:00+00:00"


def test_turn_id_is_its_effect_key_and_nothing_else() -> None:
    assert turn().id == turn(query="other", answer="other", recorded_at=AT + timedelta(1)).id
    assert turn().id == turn(shown=("m1", "m2")).id
    assert turn().id != turn(turn=4).id
    assert turn().id != turn(run="r2").id
    assert turn().id != turn(thread="t2").id
    assert turn().id != turn(tenant="acme2").id


def test_ids_keep_key_parts_apart() -> None:
    assert turn(tenant="a|b", thread="c").id != turn(tenant="a", thread="b|c").id


def test_message_id_is_its_natural_key_in_its_source() -> None:
    first = MessageRecorded("acme", "t1", "src-1", "hello", "Ana", AT, 0.5, "m")
    assert first.id == MessageRecorded("acme", "t1", "src-1", "hi", "Bo", AT, 0.9, "m").id
    assert first.id != MessageRecorded("acme", "t1", "src-2", "hello", "Ana", AT, 0.5, "m").id
    assert first.id != MessageRecorded("acme", "t2", "src-1", "hello", "Ana", AT, 0.5, "m").id


def test_a_turn_is_two_conversation_memories_with_stable_ids() -> None:
    user, assistant = memories_of(turn())
    assert (user.role, user.content) == ("user", "Where do we deploy?")
    assert (assistant.role, assistant.content) == ("assistant", "To eu-west.")
    assert user.memory_type is MemoryType.CONVERSATION
    assert user.thread == "t1" and user.timestamp == AT and user.event_id == turn().id
    assert [m.id for m in memories_of(turn())] == [user.id, assistant.id]
    assert user.id != assistant.id


def test_times_are_kept_in_utc_whatever_zone_they_came_in() -> None:
    local = AT.astimezone(timezone(timedelta(hours=2)))
    decoded = decode_event(encode_event(turn(recorded_at=local)))
    assert decoded.recorded_at == AT


def test_events_refuse_naive_times_bad_tenants_and_bad_metadata() -> None:
    with pytest.raises(InvalidInputError, match="no time zone"):
        turn(recorded_at=datetime(2026, 1, 1))
    with pytest.raises(InvalidTenantError):
        turn(tenant="")
    with pytest.raises(InvalidInputError, match="strings to strings"):
        turn(metadata={"n": 1})


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"garbage{", "not a JSON event"),
        (b"\xff\xfe", "not a JSON event"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"type": "Nope", "version": 1}', "unknown event type 'Nope'"),
        (b'{"version": 1}', "unknown event type None"),
        (b"", "not a JSON event"),
    ],
)
def test_malformed_messages_raise_a_decode_error_saying_what_is_wrong(
    raw: bytes, says: str
) -> None:
    with pytest.raises(EventDecodeError, match=says):
        decode_event(raw)


def _tampered(**changes: object) -> bytes:
    body = json.loads(encode_event(turn()))
    body.update(changes)
    return json.dumps(body).encode()


def test_a_newer_version_names_both_versions() -> None:
    with pytest.raises(EventVersionError) as caught:
        decode_event(_tampered(version=4))
    assert (caught.value.expected, caught.value.actual) == (3, 4)
    assert "version 4" in str(caught.value) and "versions 1 to 3" in str(caught.value)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"turn": "3"}, "TurnCompleted.turn has the wrong type"),
        ({"importance": True}, "TurnCompleted.importance has the wrong type"),
        ({"recorded_at": "yesterday"}, "TurnCompleted.recorded_at is invalid"),
        ({"tenant": ""}, "TurnCompleted is invalid"),
        ({"id": "0000"}, "carries id '0000'"),
        ({"query": "changed after the id was made"}, None),
    ],
)
def test_wrong_fields_and_forged_ids_are_refused(
    changes: dict[str, object], says: str | None
) -> None:
    raw = _tampered(**changes)
    if says is None:
        # Content is not part of a turn's effect key: the event stays valid.
        assert decode_event(raw).query == "changed after the id was made"
        return
    with pytest.raises(EventDecodeError, match=says):
        decode_event(raw)


def test_a_missing_field_is_named() -> None:
    body = json.loads(encode_event(turn()))
    del body["answer"]
    with pytest.raises(EventDecodeError, match="lacks field 'answer'"):
        decode_event(json.dumps(body).encode())
