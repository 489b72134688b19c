"""ItemStored: the event a LangGraph store put writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memstream import decode_event, encode_event
from memstream.errors import EventDecodeError, InvalidInputError
from memstream.memory.events import (
    ITEM_KEY,
    ITEM_NAMESPACE,
    ITEM_VALUE,
    ItemStored,
    item_memory_id,
    memories_of,
)

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def put(value: str = '{"text": "teal"}', put_id: str = "p1") -> ItemStored:
    return ItemStored(
        tenant="alice",
        namespace=("memories", "alice"),
        key="colour",
        put_id=put_id,
        value=value,
        text="teal",
        recorded_at=AT,
        importance=0.5,
        embedding_model="m",
    )


def test_round_trips_through_the_wire_format() -> None:
    event = put()
    assert decode_event(encode_event(event)) == event


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
