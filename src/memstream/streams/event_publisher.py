"""Publishing and waiting: `EventPublisher` writes memory events to the memory topic, keyed by
tenant, and returns once the broker has them (the server, the importer, the CLI; the agent
side's hooks, which must not wait, use streams.background_publisher).

The producer is idempotent with acks=all, so a retry after a lost acknowledgement never
writes an event twice into the log, and `publish` returns only once every event is durably
in the log. (Apply-once in the projection covers the remaining case: the same effect
published again by a new producer after a crash.)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from types import TracebackType

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from memstream.errors import KafkaUnavailableError
from memstream.memory.cipher import Keyring
from memstream.memory.events import MemoryEvent, MemoryForgotten
from memstream.memory.monitoring import LoggingMonitor, MonitoringEvent
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import Topics
from memstream.streams.wire import event_record, monitoring_record, producer_config, send

__all__ = ["EventPublisher"]


class EventPublisher:
    def __init__(
        self,
        kafka: KafkaConnection,
        topics: Topics,
        *,
        timeout_s: float = 15.0,
        keyring: Keyring | None = None,
    ) -> None:
        self._kafka = kafka
        self._keyring = keyring
        self._topics = topics
        # No linger: every write here waits for its acknowledgement, and would wait the linger
        # out first (an HTTP write's p50 halved without it: docs/benchmarks.md, "serve").
        self._producer = AIOKafkaProducer(
            **producer_config(
                kafka, "aiokafka", {"linger_ms": 0, "request_timeout_ms": int(timeout_s * 1000)}
            )
        )
        self._timeout_s = timeout_s

    async def __aenter__(self) -> EventPublisher:
        try:
            await asyncio.wait_for(self._producer.start(), self._timeout_s)
        except (KafkaError, TimeoutError) as exc:
            await self._producer.stop()
            raise self._unavailable(await self._kafka.explain(exc)) from exc
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._producer.stop()

    async def publish(self, events: Sequence[MemoryEvent]) -> None:
        """Send `events` in order and wait until the broker has acknowledged all of them."""
        try:
            sends = [
                await send(self._producer, event_record(self._topics, event, self._keyring))
                for event in events
            ]
            await asyncio.wait_for(asyncio.gather(*sends), self._timeout_s)
        except (KafkaError, TimeoutError) as exc:
            raise self._unavailable(exc) from exc
        if self._keyring is not None and self._keyring.unconfirmed:
            # Acknowledged, but readable only with their key: one made while Kafka was away
            # must be durable too before the caller hears that these are.
            await asyncio.to_thread(self._keyring.confirm, self._timeout_s)

    async def announce(self, event: MonitoringEvent) -> None:
        """Put `event` on the monitoring topic and wait for the broker; a broker that cannot
        take it is no reason to fail the request that made it (it is logged instead)."""
        try:
            sent = await send(self._producer, monitoring_record(self._topics, event))
            await asyncio.wait_for(sent, self._timeout_s)
        except (KafkaError, TimeoutError):
            LoggingMonitor().announce(event)

    async def forget(
        self,
        tenant: str,
        *,
        memory_ids: Sequence[str] = (),
        thread: str | None = None,
        before: datetime | None = None,
        everything: bool = False,
    ) -> MemoryForgotten:
        """Ask for a tenant's memories to be forgotten (by ids, by filter, or all of them).

        The request id and time are decided here, once, and carried in the event: retrying
        `publish` with the returned event never forgets twice. Returns once the request is in
        the log; the projection applies it shortly after (wait on its id to know when).
        """
        event = MemoryForgotten(
            tenant=tenant,
            request_id=uuid.uuid4().hex,
            requested_at=datetime.now(UTC),
            memory_ids=tuple(memory_ids),
            thread=thread,
            before=before,
            everything=everything,
        )
        await self.publish([event])
        return event

    def _unavailable(self, why: BaseException | str) -> KafkaUnavailableError:
        why = why if isinstance(why, str) else repr(why)
        return KafkaUnavailableError(
            f"could not write to Kafka at {self._kafka.where} ({why}); the events were not "
            "recorded. Check the broker (`memstream status`) and MEMSTREAM_KAFKA_BOOTSTRAP, "
            "then try again: events carry deterministic ids, so a retry never duplicates."
        )
