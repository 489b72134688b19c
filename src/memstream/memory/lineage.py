"""Lineage of memories: the provenance an event gives the memories it writes, and what a
turn was shown traced back to the events that wrote it.

`provenance_of` is pure — the event and the position of the log record it came from — so
the projection, a replay into a new generation and the in-process store all give a memory the
same provenance for the same record. `turns_shown` reads a tenant's events in log order
(`memstream explain`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from memstream.memory.events import (
    REGISTRY,
    MemoryEvent,
    TurnCompleted,
    memory_ids_of,
)
from memstream.memory.model import Memory
from memstream.memory.ports import Position
from memstream.memory.provenance import NO_LOG, Provenance

__all__ = [
    "Logged",
    "ShownMemory",
    "ShownTurn",
    "provenance_of",
    "turns_shown",
    "with_provenance",
]


@dataclass(frozen=True, slots=True)
class Logged:
    """One of the tenant's events where the log holds it, and when it was written there;
    `event_id` is its id (the decoder's, which checked it: some ids are digests)."""

    event: MemoryEvent
    position: Position
    written_at: datetime
    event_id: str


def provenance_of(
    event: MemoryEvent, topic: str = NO_LOG[0], partition: int = NO_LOG[1], offset: int = NO_LOG[2]
) -> Provenance | None:
    """The provenance of the memories `event` writes, read at `topic`/`partition`@`offset`
    (the defaults: not from a log); None for an event that writes no memory."""
    row = REGISTRY.of(event)
    if row.origin is None:
        return None
    origin = row.origin(event)
    return Provenance(
        event_id=event.id,
        event_type=row.name,
        event_version=row.version,
        topic=topic,
        partition=partition,
        offset=offset,
        thread=origin.thread,
        run=origin.run,
        turn=origin.turn,
        recorded_at=origin.at,
        replaced=origin.replaced,
    )


def with_provenance(
    memories: Sequence[Memory], provenance: Provenance | None
) -> tuple[Memory, ...]:
    """`memories`, each carrying `provenance`."""
    return tuple(dataclasses.replace(m, provenance=provenance) for m in memories)


@dataclass(frozen=True, slots=True)
class ShownMemory:
    """A memory a turn was shown: the `provenance` of the write it saw (None: no readable
    event of the log wrote it), and for a summary the provenance of what it `replaced`, as
    they were when the summary was written."""

    memory_id: str
    provenance: Provenance | None
    sources: tuple[Provenance, ...] = ()


@dataclass(frozen=True, slots=True)
class ShownTurn:
    """One recorded turn (`provenance` of its TurnCompleted) and what its prompt showed."""

    provenance: Provenance
    shown: tuple[ShownMemory, ...]


def turns_shown(logged: Iterable[Logged], run: str, turn: int | None = None) -> list[ShownTurn]:
    """The turns of `run` (only turn `turn`, if given) in `logged` — a tenant's events in log
    order, each where the log holds it — each with what it was shown, traced to the events
    that wrote it as the log stood at that turn."""
    writers: dict[str, Logged] = {}
    found: list[ShownTurn] = []
    for entry in logged:
        event = entry.event
        if isinstance(event, TurnCompleted) and event.run == run and turn in (None, event.turn):
            shown = tuple(_traced(memory_id, writers) for memory_id in event.shown)
            found.append(ShownTurn(_provenance(entry), shown))
        # The writes themselves, not their provenance: only the shown ones' is worked out.
        for memory_id in memory_ids_of(event):
            writers[memory_id] = entry
    return found


def _provenance(entry: Logged) -> Provenance:
    at = entry.position
    provenance = provenance_of(entry.event, at.topic, at.partition, at.offset)
    assert provenance is not None  # only events that write memories are asked about
    return provenance


def _traced(memory_id: str, writers: Mapping[str, Logged]) -> ShownMemory:
    writer = writers.get(memory_id)
    if writer is None:
        return ShownMemory(memory_id, None)
    provenance = _provenance(writer)
    sources = tuple(_provenance(writers[r]) for r in provenance.replaced if r in writers)
    return ShownMemory(memory_id, provenance, sources)
