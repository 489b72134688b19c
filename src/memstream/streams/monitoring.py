"""Monitoring events: what operators (and `memstream tail`) see on the monitoring topic.

Like memory events they are frozen, versioned and written as explicit JSON; unlike them they
are informational, and nothing is rebuilt from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from memstream.memory.monitoring import encode_monitoring

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
