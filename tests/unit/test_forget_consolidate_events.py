"""MemoryForgotten and MemoriesConsolidated: ids from effect keys, validation, wire format."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from memstream import decode_event, encode_event, memories_of
from memstream.errors import InvalidInputError
from memstream.memory.events import MemoriesConsolidated, MemoryForgotten
from memstream.memory.model import MemoryType

AT = datetime(2026, 5, 1, tzinfo=UTC)


def consolidated(**changes: object) -> MemoriesConsolidated:
    fields: dict[str, object] = dict(
        tenant="acme",
        memory_ids=("b", "a"),
        summary="they deploy on Fridays",
        memory_type=MemoryType.KNOWLEDGE,
        thread="t1",
        timestamp=AT,
        importance=0.8,
        embedding_model="m@1",
        metadata={"source": "x"},
    )
    fields.update(changes)
    return MemoriesConsolidated(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "event",
    [
        MemoryForgotten("acme", "req-1", AT, memory_ids=("m2", "m1")),
        MemoryForgotten("acme", "req-2", AT, thread="t1", before=AT - timedelta(days=1)),
        MemoryForgotten("acme", "req-3", AT, everything=True),
        consolidated(),
    ],
)
def test_round_trips_through_the_wire_format(event: object) -> None:
    assert decode_event(encode_event(event)) == event  # type: ignore[arg-type]


def test_a_consolidation_id_is_the_tenant_and_the_sorted_group() -> None:
    assert consolidated().id == consolidated(memory_ids=("a", "b"), summary="other").id
    assert consolidated().memory_ids == ("a", "b")
    assert consolidated().id != consolidated(memory_ids=("a", "c")).id
    assert consolidated().id != consolidated(tenant="acme2").id


def test_the_summary_memory_carries_what_the_event_decided() -> None:
    (summary,) = memories_of(consolidated())
    assert summary.content == "they deploy on Fridays"
    assert summary.memory_type is MemoryType.KNOWLEDGE
    assert (summary.timestamp, summary.importance) == (AT, 0.8)
    assert summary.event_id == consolidated().id and summary.metadata == {"source": "x"}
    assert memories_of(consolidated(summary="changed"))[0].id == summary.id


def test_a_forget_id_is_the_tenant_and_the_request_decided_once() -> None:
    one = MemoryForgotten("acme", "req-1", AT, everything=True)
    assert one.id == MemoryForgotten("acme", "req-1", AT + timedelta(1), everything=True).id
    assert one.id != MemoryForgotten("acme", "req-2", AT, everything=True).id
    assert memories_of(one) == ()


@pytest.mark.parametrize(
    ("selector", "says"),
    [
        ({}, "say what to forget"),
        ({"everything": True, "thread": "t"}, "say what to forget"),
        ({"memory_ids": ("m",), "thread": "t"}, "say what to forget"),
        ({"before": datetime(2026, 1, 1)}, "no time zone"),
    ],
)
def test_a_forget_says_exactly_one_thing(selector: dict[str, object], says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        MemoryForgotten("acme", "req", AT, **selector)  # type: ignore[arg-type]


def test_a_consolidation_needs_a_group_and_a_summary() -> None:
    with pytest.raises(InvalidInputError, match="at least two"):
        consolidated(memory_ids=("a", "a"))
    with pytest.raises(InvalidInputError, match="non-empty summary"):
        consolidated(summary="  ")


def test_wrong_field_types_are_named() -> None:
    body = json.loads(encode_event(MemoryForgotten("acme", "r", AT, everything=True)))
    body["everything"] = 1
    with pytest.raises(ValueError, match=r"MemoryForgotten\.everything has the wrong type"):
        decode_event(json.dumps(body).encode())
    body = json.loads(encode_event(consolidated()))
    body["memory_ids"] = "a,b"
    with pytest.raises(ValueError, match=r"MemoriesConsolidated\.memory_ids has the wrong type"):
        decode_event(json.dumps(body).encode())
