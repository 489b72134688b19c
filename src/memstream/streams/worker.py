"""The Faust worker: the stream processor that keeps the Redis projection up to date.

What is the worker?
    One Faust app with one agent, `project`, subscribed to the memory topic, and one timer
    that runs the consolidation job (streams.consolidation) for windows that have closed. Each agent
    instance owns some of the topic's partitions, and since the topic is keyed by tenant, all
    events of a tenant arrive at one instance, in the order they were written. The agent is a
    thin loop: it buffers up to BATCH_SIZE messages (or BATCH_WITHIN_S seconds' worth),
    hands them to the Projector, and only then lets Faust acknowledge them. A crash before
    that means redelivery, which apply-once in Redis turns into a no-op.

Messages are read raw (bytes): decoding is the projector's job, so that a malformed message
becomes a dead letter instead of a crashed stream.

Processing guarantee: exactly_once. `run_worker` runs the app under faust.Worker, the only
way Faust turns it on (a bare `app.start()` leaves `in_worker` false and silently falls back
to at-least-once). Each assigned partition then gets a transactional producer, and consumer
offsets are committed inside Kafka transactions (works on Kafka 4.1 with aiokafka 0.14). The
Redis projection cannot join a Kafka transaction; what makes it exactly-once is apply-once
(markers and writes in one Lua script), which turns every redelivery after a crash into a
no-op. Dead letters and monitoring events go through the app's plain idempotent producer:
Faust picks a transactional producer by the *destination* partition, which only works for
topics co-partitioned with the source, and those topics are not. They are awaited before the
batch is acknowledged, so they are at-least-once. See docs/streams.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import faust

from memstream.config import Settings
from memstream.errors import EventDecodeError
from memstream.llm import ModelClient
from memstream.memory.embeddings import Embedder
from memstream.memory.monitoring import (
    DeadLettered,
    MonitoringEvent,
    encode_monitoring,
    monitoring_key,
)
from memstream.memory.ports import MemoryReader, ProjectionWriter
from memstream.streams.consolidation import ConsolidationJob, encoded
from memstream.streams.projector import Projector, RawMessage
from memstream.streams.topics import Topics

__all__ = ["BATCH_SIZE", "BATCH_WITHIN_S", "build_app", "run_app"]

log = logging.getLogger(__name__)

BATCH_SIZE = 128
BATCH_WITHIN_S = 0.02


class _Monitoring:
    """Dead letters and monitoring events, written by the app's plain (non-transactional)
    producer. `announce` (the Monitor port) only starts a send; the agent awaits them all
    (`drained`) before a batch is acknowledged, so notices are at-least-once."""

    def __init__(self, app: faust.App, topics: Topics) -> None:
        self._app = app
        self._topics = topics
        self._sending: list[asyncio.Task[None]] = []

    async def _send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Mapping[str, bytes]
    ) -> None:
        producer = self._app.producer
        await producer.maybe_start()
        sent = await producer.send(topic, key, value, None, None, list(headers.items()))
        await sent

    async def send(self, message: RawMessage, error: EventDecodeError) -> None:
        headers = {
            "memstream-error-code": error.code.encode(),
            "memstream-error": str(error).encode("utf-8"),
            "memstream-source": f"{message.topic}/{message.partition}/{message.offset}".encode(),
        }
        # Awaiting the delivery, not just the send, keeps the message from being
        # acknowledged on the memory topic before its dead letter is durable.
        await self._send(self._topics.dead_letters, message.key, message.value, headers)
        notice = DeadLettered(
            source_topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            code=error.code,
            reason=str(error),
            at=datetime.now(UTC),
        )
        await self._send(self._topics.monitoring, message.key, encode_monitoring(notice), {})

    async def publish(self, topic: str, key: bytes, value: bytes) -> None:
        await self._send(topic, key, value, {})

    def announce(self, event: MonitoringEvent) -> None:
        send = self._send(
            self._topics.monitoring, monitoring_key(event), encode_monitoring(event), {}
        )
        self._sending.append(asyncio.ensure_future(send))

    async def drained(self) -> None:
        """Wait until every announced event is durable."""
        sending, self._sending = self._sending, []
        await asyncio.gather(*sending)


def build_app(
    settings: Settings,
    topics: Topics,
    embedder: Embedder,
    writer: ProjectionWriter,
    reader: MemoryReader,
    summarizer: ModelClient,
) -> faust.App:
    """The worker's Faust app over the given parts (`Deployment.worker_app` gives them)."""
    app = faust.App(
        f"{settings.namespace}-projector",
        broker=";".join(f"kafka://{host}" for host in settings.bootstrap_servers.split(",")),
        store="memory://",
        web_enabled=False,
        # The leader topic is for Faust features memstream does not use; skipping it avoids
        # one more internal topic per app.
        topic_disable_leader=True,
        topic_replication_factor=1,
        topic_partitions=settings.partitions,
        consumer_auto_offset_reset="earliest",
        # Faust's 60 s default keeps a SIGKILLed worker's partitions idle for a minute.
        broker_session_timeout=settings.worker_session_timeout_s,
        broker_heartbeat_interval=settings.worker_session_timeout_s / 5,
        producer_acks=-1,
        # Only takes effect under faust.Worker (run_app); see the module's docstring.
        processing_guarantee="exactly_once",
        autodiscover=False,
    )
    raw: dict[str, Any] = {"key_serializer": "raw", "value_serializer": "raw"}
    memory_topic = app.topic(topics.memory, **raw)
    monitoring = _Monitoring(app, topics)
    projector = Projector(
        embedder,
        writer,
        monitoring,
        default_importance=settings.default_importance,
        monitor=monitoring,
    )
    consolidation = ConsolidationJob(
        reader=reader,
        client=summarizer,
        embedding_model=embedder.model_id,
        send=lambda event: monitoring.publish(topics.memory, *encoded(event)),
        monitor=monitoring,
        window_s=settings.consolidation_window_s,
    )

    @app.agent(memory_topic, name="project")
    async def project(stream: faust.StreamT[bytes]) -> None:
        await projector.start()
        # take_events is faust-streaming's; its StreamT protocol does not declare it.
        batches = stream.take_events(BATCH_SIZE, within=BATCH_WITHIN_S)  # type: ignore[attr-defined]
        async for events in batches:
            messages = [
                RawMessage(
                    topic=e.message.topic,
                    partition=e.message.partition,
                    offset=e.message.offset,
                    key=e.message.key,
                    value=e.message.value,
                    timestamp=datetime.fromtimestamp(e.message.timestamp, UTC),
                )
                for e in events
            ]
            outcomes = await projector.project(messages)
            await monitoring.drained()
            consolidation.observe(outcomes)
            log.info(
                "projected %d messages (%d applied now)",
                len(messages),
                sum(o.applied_now for o in outcomes),
            )

    @app.timer(interval=0.5)  # type: ignore[untyped-decorator]
    async def consolidate() -> None:
        await consolidation.run_due()
        await monitoring.drained()

    return app


def run_app(app: faust.App, *, loglevel: str = "info") -> None:
    """Run the worker's app until SIGINT or SIGTERM, under faust.Worker (exactly_once)."""
    faust.Worker(app, loglevel=loglevel, quiet=True).execute_from_commandline()
