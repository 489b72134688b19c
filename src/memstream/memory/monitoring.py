"""Monitoring: events that tell operators what memory skipped or did, and the port they go to.

Memory's failures after an answer never reach the user (the answer stands); they are
announced here instead. Events are versioned JSON like memory events; nothing is rebuilt from
them. The Kafka adapter (streams) publishes them on the monitoring topic; `LoggingMonitor`
only logs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Protocol

__all__ = [
    "LoggingMonitor",
    "ModelUsage",
    "Monitor",
    "MonitoringEvent",
    "Skipped",
    "encode_monitoring",
]

log = logging.getLogger("memstream.monitoring")


class MonitoringEvent(Protocol):
    type: ClassVar[str]
    version: ClassVar[int]


@dataclass(frozen=True, slots=True)
class Skipped:
    """Memory skipped a step of a turn (the turn itself went on)."""

    type: ClassVar[str] = "Skipped"
    version: ClassVar[int] = 1

    tenant: str
    thread: str
    run_id: str
    stage: Literal["recall", "record", "consolidate"]
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


def encode_monitoring(event: Any) -> bytes:
    """Any monitoring event (a frozen dataclass with `type` and `version`) as JSON."""
    body: dict[str, Any] = {"type": event.type, "version": event.version}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        body[f.name] = value.astimezone(UTC).isoformat() if isinstance(value, datetime) else value
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


class Monitor(Protocol):
    def announce(self, event: Skipped) -> None:
        """Publish without blocking and without raising: monitoring must not fail a turn."""
        ...


class LoggingMonitor:
    def announce(self, event: Skipped) -> None:
        log.warning("%s", encode_monitoring(event).decode())
