"""ItemStored: the event a LangGraph store put writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from memstream import decode_event, encode_event
from memstream.errors import EventDecodeError, InvalidInputError
from memstream.memory.events import (
    ITEM_KEY,
    ITEM_NAMESPACE,
    ITEM_TTL,
    ITEM_VALUE,
    ItemExpired,
    ItemStored,
    item_memory_id,
    memories_of,
)

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def put(
    value: str = '{"text": "teal"}',
    put_id: str = "p1",
    texts: tuple[str, ...] = ("teal",),
    ttl_minutes: float | None = None,
) -> ItemStored:
    return ItemStored(
        tenant="alice",
        namespace=("memories", "alice"),
        key="colour",
        put_id=put_id,
        value=value,
        texts=texts,
        recorded_at=AT,
        importance=0.5,
        embedding_model="m",
        ttl_minutes=ttl_minutes,
    )


def expiry(deadline: datetime, put_event_id: str = "e1") -> ItemExpired:
    return ItemExpired(
        tenant="alice",
        namespace=("memories", "alice"),
        key="colour",
        put_event_id=put_event_id,
        deadline=deadline,
        expired_at=deadline + timedelta(seconds=5),
    )


def test_round_trips_through_the_wire_format() -> None:
    for event in (put(), put(texts=("a", "b"), ttl_minutes=0.5), expiry(AT)):
        assert decode_event(encode_event(event)) == event


def test_several_indexed_fields_are_facets_of_one_memory_and_one_field_is_its_content() -> None:
    (several,) = memories_of(put(texts=("teal", "a calm colour")))
    assert several.content == "teal\na calm colour"
    assert several.facets == ("teal", "a calm colour")
    (one,) = memories_of(put(texts=("teal",)))
    assert (one.content, one.facets) == ("teal", ())
    (unindexed,) = memories_of(put(texts=()))
    assert (unindexed.content, unindexed.facets) == ("", ())


def test_a_ttl_sets_the_memory_deadline_and_rides_in_its_metadata() -> None:
    (memory,) = memories_of(put(ttl_minutes=1.5))
    assert memory.expires_at == AT + timedelta(seconds=90)
    assert memory.metadata[ITEM_TTL] == "1.5"
    (kept,) = memories_of(put())
    assert kept.expires_at is None and ITEM_TTL not in kept.metadata
    for wrong in (0.0, -1.0):
        with pytest.raises(InvalidInputError, match="positive number of minutes"):
            put(ttl_minutes=wrong)


def test_a_version_1_put_reads_as_its_one_text_and_no_ttl_under_the_same_id() -> None:
    body = json.loads(encode_event(put()))
    del body["texts"], body["ttl_minutes"]
    for text, texts in (("teal", ("teal",)), ("", ())):
        v1 = {**body, "version": 1, "text": text}
        event = decode_event(json.dumps(v1).encode())
        assert isinstance(event, ItemStored)
        assert (event.id, event.texts, event.ttl_minutes) == (put().id, texts, None)


def test_an_expiry_is_one_effect_per_put_and_deadline() -> None:
    assert expiry(AT).id == expiry(AT).id  # two sweepers, one lapse: one effect
    assert expiry(AT).id != expiry(AT + timedelta(minutes=1)).id  # refreshed, lapsed again
    assert expiry(AT).id != expiry(AT, put_event_id="e2").id
    assert memories_of(expiry(AT)) == ()
    assert expiry(AT).memory_id == item_memory_id("alice", ("memories", "alice"), "colour")
    with pytest.raises(InvalidInputError, match="the put it ends"):
        expiry(AT, put_event_id="")


def test_each_put_is_its_own_event_but_the_slot_is_one_memory() -> None:
    first, second = put(put_id="p1"), put('{"text": "red"}', put_id="p2")
    assert first.id != second.id
    assert first.id == put(put_id="p1").id  # a retried put: the same event
    (m1,), (m2,) = memories_of(first), memories_of(second)
    assert m1.id == m2.id == item_memory_id("alice", ("memories", "alice"), "colour")
    assert m1.id != item_memory_id("bob", ("memories", "alice"), "colour")


def test_the_memory_carries_namespace_key_and_value() -> None:
    (memory,) = memories_of(put())
    assert json.loads(memory.metadata[ITEM_NAMESPACE]) == ["memories", "alice"]
    assert memory.metadata[ITEM_KEY] == "colour"
    assert json.loads(memory.metadata[ITEM_VALUE]) == {"text": "teal"}
    assert memory.thread == "memories.alice" and memory.content == "teal"


def test_a_value_that_is_not_json_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="JSON"):
        put("{not json")


def test_an_altered_event_is_refused_on_decode() -> None:
    body = json.loads(encode_event(put()))
    body["key"] = "other"
    with pytest.raises(EventDecodeError, match="carries id"):
        decode_event(json.dumps(body).encode())
