"""Lineage, the pure part: the provenance an event gives its memories, and what a turn was
shown traced through a log to the writes it saw."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memstream.memory.events import (
    MemoriesConsolidated,
    MemoryForgotten,
    MemorySaved,
    TurnCompleted,
    memory_ids_of,
)
from memstream.memory.model import MemoryType
from memstream.memory.ports import Position
from memstream.memory.provenance import Logged, provenance_json, provenance_of
from memstream.memory.shown import turns_shown

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def turn(run: str, n: int, shown: tuple[str, ...] = ()) -> TurnCompleted:
    return TurnCompleted(
        tenant="acme", thread="t1", run=run, turn=n, query=f"q{n}", answer=f"a{n}",
        recorded_at=T0 + timedelta(minutes=n), importance=0.5, embedding_model="m", shown=shown,
    )  # fmt: skip


def saved(text: str) -> MemorySaved:
    return MemorySaved(
        tenant="acme", memory_id="note-1", thread="notes", content=text,
        memory_type=MemoryType.USER_FACT, role="user", saved_at=T0, importance=0.5,
        embedding_model="m",
    )  # fmt: skip


def test_a_turns_memories_name_the_turn_and_a_forget_makes_none() -> None:
    event = turn("r1", 3)
    p = provenance_of(event, "memory", 2, 41)
    assert p is not None
    assert (p.event_id, p.event_type, p.event_version) == (event.id, "TurnCompleted", 3)
    assert (p.topic, p.partition, p.offset, p.in_log) == ("memory", 2, 41, True)
    assert (p.thread, p.run, p.turn, p.recorded_at, p.replaced) == (
        "t1",
        "r1",
        3,
        event.recorded_at,
        (),
    )
    assert provenance_of(event) is not None and not provenance_of(event).in_log  # type: ignore[union-attr]
    assert provenance_json(provenance_of(event))["offset"] is None  # type: ignore[index]
    forget = MemoryForgotten(tenant="acme", request_id="x", requested_at=T0, everything=True)
    assert provenance_of(forget, "memory", 2, 42) is None


def test_what_a_turn_was_shown_is_traced_to_the_writes_it_saw_summaries_to_their_sources() -> None:
    told = turn("told", 0)
    note = saved("The user is vegetarian.")
    told_ids = memory_ids_of(told)
    summary = MemoriesConsolidated(
        "acme", told_ids, "q0 / a0", MemoryType.CONVERSATION, "t1", T0, 0.5, "m"
    )
    (summary_id,) = memory_ids_of(summary)
    asked = turn("asked", 0, shown=(summary_id, "note-1", "never-written"))
    later = saved("The user is vegan.")  # the same id written again, after the turn
    log = [
        Logged(e, Position("memory", 0, offset), T0, e.id)
        for offset, e in enumerate([told, note, summary, asked, later])
    ]

    (traced,) = turns_shown(log, "asked")
    assert traced.provenance.event_id == asked.id and traced.provenance.offset == 3
    assert [s.memory_id for s in traced.shown] == [summary_id, "note-1", "never-written"]
    first, second, third = traced.shown
    assert first.provenance is not None and first.provenance.offset == 2
    assert [p.offset for p in first.sources] == [0, 0]
    assert {(p.run, p.turn) for p in first.sources} == {("told", 0)}
    # The note as the turn saw it: the write before the turn, not the one after.
    assert second.provenance is not None and second.provenance.event_id == note.id
    assert third.provenance is None and third.sources == ()
    assert turns_shown(log, "asked", turn=1) == []
    assert [t.shown for t in turns_shown(log, "told")] == [()]
