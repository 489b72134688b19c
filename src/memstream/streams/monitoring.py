"""Monitoring events: what operators (and `memstream tail`) see on the monitoring topic.

Like memory events they are frozen, versioned and written as explicit JSON; unlike them they
are informational, and nothing is rebuilt from them. The projector announces what applying an
event did (`notices_of`) only when it was applied now, so redeliveries and rebuilds stay quiet.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from memstream.memory.events import MemoriesConsolidated, MemoryForgotten
from memstream.memory.monitoring import encode_monitoring
from memstream.projections.writer import AppliedOutcome

__all__ = [
    "Consolidated",
    "DeadLettered",
    "Evicted",
    "Forgotten",
    "MonitoringEvent",
    "TenantNotice",
    "encode_monitoring",
    "notices_of",
]


@dataclass(frozen=True, slots=True)
class DeadLettered:
    """A message of the memory topic could not be projected and went to the dead-letter topic."""

    type: ClassVar[str] = "DeadLettered"
    version: ClassVar[int] = 1

    source_topic: str
    partition: int
    offset: int
    code: str
    reason: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Evicted:
    """Applying an event pushed a tenant past its bound: these memories were evicted."""

    type: ClassVar[str] = "Evicted"
    version: ClassVar[int] = 1

    tenant: str
    event_id: str
    memory_ids: tuple[str, ...]
    at: datetime


@dataclass(frozen=True, slots=True)
class Forgotten:
    """A MemoryForgotten was applied: these stored memories were deleted and tombstoned."""

    type: ClassVar[str] = "Forgotten"
    version: ClassVar[int] = 1

    tenant: str
    event_id: str
    memory_ids: tuple[str, ...]
    at: datetime


@dataclass(frozen=True, slots=True)
class Consolidated:
    """A MemoriesConsolidated was applied (`applied`), or skipped whole because `missing`
    members were gone."""

    type: ClassVar[str] = "Consolidated"
    version: ClassVar[int] = 1

    tenant: str
    event_id: str
    replaced: tuple[str, ...]
    summary_ids: tuple[str, ...]
    applied: bool
    missing: tuple[str, ...]
    at: datetime


TenantNotice = Evicted | Forgotten | Consolidated
MonitoringEvent = DeadLettered | TenantNotice


def notices_of(outcome: AppliedOutcome, at: datetime) -> list[TenantNotice]:
    """What to announce about an applied event; nothing for a repeat."""
    if not outcome.applied_now:
        return []
    event = outcome.event
    notices: list[TenantNotice] = []
    if isinstance(event, MemoryForgotten):
        notices.append(Forgotten(event.tenant, event.id, outcome.removed, at))
    elif isinstance(event, MemoriesConsolidated):
        notices.append(
            Consolidated(
                event.tenant,
                event.id,
                event.memory_ids,
                outcome.memory_ids,
                not outcome.skipped,
                outcome.missing,
                at,
            )
        )
    if outcome.evicted:
        notices.append(Evicted(event.tenant, event.id, outcome.evicted, at))
    return notices
