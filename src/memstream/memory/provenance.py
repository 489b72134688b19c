"""Provenance: where a memory came from — the event that made it and that event's place in the log.

A memory's provenance is a function of the event and the log record it was read from, never of
a clock or of the projection's state (`provenance_of` is pure), so the projection, a rebuild
from the log and the in-process store all give a memory the same provenance for the same
record. The in-process store has no log: its memories carry the event's part only (`topic`
"", `partition` and `offset` -1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from memstream.memory.events import REGISTRY, MemoryEvent
from memstream.memory.ports import Position

if TYPE_CHECKING:  # a memory carries its provenance: the model imports this module
    from memstream.memory.model import Memory

__all__ = [
    "NO_LOG",
    "Logged",
    "Provenance",
    "provenance_json",
    "provenance_of",
    "with_provenance",
]

NO_LOG = ("", -1, -1)  # the log position of an event that never went through a log


@dataclass(frozen=True, slots=True)
class Provenance:
    """The event that made a memory (`event_id`, `event_type`, `event_version`: the version the
    event was applied at, after upcasting), its log position (`topic`, `partition`, `offset`),
    the `thread`, `run` and `turn` it was recorded in (a run and turn only for a turn's
    memories: "" and None otherwise), and `recorded_at`, the time the event carries (a
    summary's: the latest of its group). A summary lists the memory ids it `replaced`, an
    extracted fact those it was `derived` from."""

    event_id: str
    event_type: str
    event_version: int
    topic: str
    partition: int
    offset: int
    thread: str
    run: str
    turn: int | None
    recorded_at: datetime
    replaced: tuple[str, ...] = ()
    derived: tuple[str, ...] = ()

    @property
    def in_log(self) -> bool:
        """Whether the position is a real log position (False in the in-process store)."""
        return self.offset >= 0


def provenance_json(provenance: Provenance | None) -> dict[str, object] | None:
    """`provenance` as JSON values: what `recall --json`, `explain`, the HTTP API and MCP show
    (the position only where the memory came from a log)."""
    if provenance is None:
        return None
    p = provenance
    shown: dict[str, object] = {
        "event_id": p.event_id,
        "event_type": p.event_type,
        "event_version": p.event_version,
        "topic": p.topic if p.in_log else None,
        "partition": p.partition if p.in_log else None,
        "offset": p.offset if p.in_log else None,
        "thread": p.thread,
        "run": p.run or None,
        "turn": p.turn,
        "recorded_at": p.recorded_at.isoformat(),
    }
    if p.replaced:
        shown["replaced"] = list(p.replaced)
    if p.derived:
        shown["derived_from"] = list(p.derived)
    return shown


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
        derived=origin.derived,
    )


def with_provenance(
    memories: Sequence[Memory], provenance: Provenance | None
) -> tuple[Memory, ...]:
    """`memories`, each carrying `provenance`."""
    return tuple(dataclasses.replace(m, provenance=provenance) for m in memories)
