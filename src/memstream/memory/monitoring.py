"""Monitoring: what operators (and `memstream tail`) see of what memory did or skipped, and
the one port it goes out through.

Memory's failures after an answer never reach the user (the answer stands); they are
announced here instead (`Skipped`). So is what the worker did beyond writing memories: a
message it could not read (`DeadLettered`) and what a retry of it did (`DeadLetterRetried`),
memories evicted by a bound, forgotten or
consolidated, and model calls made outside a turn (`ModelUsage`). Like memory events these
are frozen, versioned and written as explicit JSON, keyed by tenant on the monitoring topic;
unlike them they are informational: nothing is rebuilt from them.

`Monitor` is the port: `announce` never blocks and never raises, so monitoring cannot fail a
turn or stop a stream. The Kafka adapters publish; `LoggingMonitor` only logs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Protocol

from memstream.memory.tenancy import tenant_key

__all__ = [
    "Consolidated",
    "DeadLetterRetried",
    "DeadLettered",
    "Evicted",
    "Forgotten",
    "LoggingMonitor",
    "ModelUsage",
    "Monitor",
    "MonitoringEvent",
    "Skipped",
    "TenantNotice",
    "encode_monitoring",
    "monitoring_key",
]

log = logging.getLogger("memstream.monitoring")


@dataclass(frozen=True, slots=True)
class Skipped:
    """Memory skipped a step of a turn (the turn itself went on)."""

    type: ClassVar[str] = "Skipped"
    version: ClassVar[int] = 1

    tenant: str
    thread: str
    run_id: str
    stage: Literal["recall", "record", "consolidate", "extract"]
    code: str
    reason: str
    at: datetime


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """Model calls memory made outside a turn (consolidation), accounted to the tenant and,
    where known, the thread whose turn asked for them."""

    type: ClassVar[str] = "Usage"
    version: ClassVar[int] = 1

    tenant: str
    thread: str
    purpose: str
    calls: int
    input_tokens: int
    output_tokens: int
    at: datetime


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
class DeadLetterRetried:
    """`memstream dead-letters retry` re-drove a dead letter: it was applied, found applied
    already, refused again (`new_code`; a new letter holds it) or erased."""

    type: ClassVar[str] = "DeadLetterRetried"
    version: ClassVar[int] = 1

    source_topic: str
    partition: int
    offset: int
    letter_offset: int
    code: str
    outcome: str  # applied, already_applied, failed or erased
    new_code: str
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
MonitoringEvent = Skipped | ModelUsage | DeadLettered | DeadLetterRetried | TenantNotice


def encode_monitoring(event: MonitoringEvent) -> bytes:
    """A monitoring event as one JSON object: `type`, `version`, then its fields."""
    body: dict[str, Any] = {"type": event.type, "version": event.version}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if isinstance(value, datetime):
            value = value.astimezone(UTC).isoformat()
        elif isinstance(value, tuple):
            value = list(value)
        body[f.name] = value
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def monitoring_key(event: MonitoringEvent) -> bytes | None:
    """The Kafka key of a notice: its tenant's key (per-tenant order); a dead letter's tenant
    is unknown, so it has none."""
    if isinstance(event, DeadLettered | DeadLetterRetried):
        return None
    return tenant_key(event.tenant)


class Monitor(Protocol):
    def announce(self, event: MonitoringEvent) -> None:
        """Publish `event` without blocking and without raising: monitoring must not fail a
        turn or stop a stream."""
        ...


class LoggingMonitor:
    def announce(self, event: MonitoringEvent) -> None:
        log.warning("%s", encode_monitoring(event).decode())
