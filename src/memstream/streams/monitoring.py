"""Monitoring events: what operators (and `memstream tail`) see on the monitoring topic.

Like memory events they are frozen, versioned and written as explicit JSON; unlike them they
are informational, and nothing is rebuilt from them.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

__all__ = ["DeadLettered", "encode_monitoring"]


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


def encode_monitoring(event: DeadLettered) -> bytes:
    body: dict[str, Any] = {"type": event.type, "version": event.version}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        body[f.name] = value.astimezone(UTC).isoformat() if isinstance(value, datetime) else value
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
