"""Provenance: where a memory came from — the event that made it and that event's place in the log.

A memory's provenance is a function of the event and the log record it was read from, never of
a clock or of the projection's state, so a rebuild from the log gives every memory the same
provenance. The in-process store has no log: its memories carry the event's part only
(`topic` "", `partition` and `offset` -1).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["NO_LOG", "Provenance", "provenance_json"]

NO_LOG = ("", -1, -1)  # the log position of an event that never went through a log


@dataclass(frozen=True, slots=True)
class Provenance:
    """The event that made a memory (`event_id`, `event_type`, `event_version`: the version the
    event was applied at, after upcasting), its log position (`topic`, `partition`, `offset`),
    the `thread`, `run` and `turn` it was recorded in (a run and turn only for a turn's
    memories: "" and None otherwise), and `recorded_at`, the time the event carries (a
    summary's: the latest of its group). A summary lists the memory ids it `replaced`."""

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
    return shown
