"""Lineage of memories: the provenance an event gives the memories it writes.

`provenance_of` is pure — the event and the position of the log record it came from — so
the projection, a replay into a new generation and the in-process store all give a memory the
same provenance for the same record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from memstream.memory.events import (
    REGISTRY,
    ItemStored,
    MemoriesConsolidated,
    MemoryEvent,
    MemorySaved,
    MessageRecorded,
    TurnCompleted,
)
from memstream.memory.model import Memory
from memstream.memory.provenance import NO_LOG, Provenance

__all__ = ["provenance_of", "with_provenance"]


def provenance_of(
    event: MemoryEvent, topic: str = NO_LOG[0], partition: int = NO_LOG[1], offset: int = NO_LOG[2]
) -> Provenance | None:
    """The provenance of the memories `event` writes, read at `topic`/`partition`@`offset`
    (the defaults: not from a log); None for an event that writes no memory."""
    run, turn = "", None
    replaced: tuple[str, ...] = ()
    if isinstance(event, TurnCompleted):
        thread, at, run, turn = event.thread, event.recorded_at, event.run, event.turn
    elif isinstance(event, MessageRecorded):
        thread, at = event.thread, event.recorded_at
    elif isinstance(event, MemorySaved):
        thread, at = event.thread, event.saved_at
    elif isinstance(event, ItemStored):
        thread, at = ".".join(event.namespace), event.recorded_at
    elif isinstance(event, MemoriesConsolidated):
        thread, at, replaced = event.thread, event.timestamp, event.memory_ids
    else:
        return None
    row = REGISTRY.of(event)
    return Provenance(
        event_id=event.id,
        event_type=row.name,
        event_version=row.version,
        topic=topic,
        partition=partition,
        offset=offset,
        thread=thread,
        run=run,
        turn=turn,
        recorded_at=at,
        replaced=replaced,
    )


def with_provenance(
    memories: Sequence[Memory], provenance: Provenance | None
) -> tuple[Memory, ...]:
    """`memories`, each carrying `provenance`."""
    return tuple(dataclasses.replace(m, provenance=provenance) for m in memories)
