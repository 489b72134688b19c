"""The Monitor adapter that writes the monitoring topic, for the agent side and the worker alike.

A notice is announced to `also` first (the agent side's log, the worker's metrics), then its
record is handed to a sink that does not wait: the agent side's background publisher, or the
worker's producer, whose sends the worker awaits before it acknowledges a batch.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from memstream.errors import KafkaUnavailableError
from memstream.memory.monitoring import Monitor, MonitoringEvent
from memstream.streams.topics import Topics
from memstream.streams.wire import Record, monitoring_record

__all__ = ["KafkaMonitor", "RecordSink"]


class RecordSink(Protocol):
    def submit(self, record: Record) -> None:
        """Start sending `record` without waiting; KafkaUnavailableError if it cannot be
        queued."""
        ...


class KafkaMonitor:
    """Announces monitoring events on the monitoring topic, without waiting."""

    def __init__(self, sink: RecordSink, topics: Topics, *, also: Monitor | None = None) -> None:
        self._sink = sink
        self._topics = topics
        self._also = also

    def announce(self, event: MonitoringEvent) -> None:
        if self._also is not None:
            self._also.announce(event)
        # A full buffer means Kafka is down; `also` (the log) is then the only trace.
        with contextlib.suppress(KafkaUnavailableError):
            self._sink.submit(monitoring_record(self._topics, event))
