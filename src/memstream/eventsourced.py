"""The event-sourced memory store: writes are events sent to Kafka, reads come from the Redis
projection that the workers keep.

`EventSourcedStores` is the `stores` resolver the middleware takes: one store per tenant,
sharing one background publisher, one Redis client and one embedder. A store is transactional:
every event carries its effect key as its id and the projection applies each id once, so
writing the same event again (a recovered run, a producer retry) never writes twice, and the
outcome of a write — the ids of the memories it writes — follows from the event itself.

Writes do not wait for the broker (see streams.background_publisher); `on_durable` fires when
the broker has the event. Reads do not wait for the projection: a memory is recallable once a
worker has applied its event (tens of milliseconds on an idle worker, see docs/operations.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from memstream.errors import ConfigurationError, KafkaUnavailableError
from memstream.memory.cipher import Keyring
from memstream.memory.events import MemoryEvent, memory_ids_of
from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.monitoring import LoggingMonitor
from memstream.memory.ports import MemoryReader, Recaller
from memstream.memory.store import MemoryFilter, WriteOutcome, check_tenant
from memstream.memory.tenancy import TenantId, validate_tenant
from memstream.streams.background_publisher import BackgroundPublisher
from memstream.streams.kafka import RIDE_OUT_S
from memstream.streams.monitor import KafkaMonitor
from memstream.streams.topics import Topics
from memstream.streams.wire import event_record

__all__ = ["EventSourcedMemoryStore", "EventSourcedStores", "keyed"]

log = logging.getLogger(__name__)

EventSink = Callable[[MemoryEvent, Callable[[], None] | None], None]


class EventSourcedMemoryStore:
    """One tenant's memory: reads from the projection, writes handed to `send` (the log)."""

    transactional = True

    def __init__(
        self,
        tenant: str,
        *,
        send: EventSink,
        reader: MemoryReader,
        embedding_model: str,
        recaller: Recaller | None = None,
    ) -> None:
        self._tenant = validate_tenant(tenant)
        self._send = send
        self._reader = reader
        self._embedding_model = embedding_model
        self._recaller = recaller

    @property
    def tenant(self) -> TenantId:
        return self._tenant

    @property
    def embedding_model(self) -> str:
        return self._embedding_model

    def search(self, query: str, *, k: int) -> list[RecalledMemory]:
        if self._recaller is None:
            raise ConfigurationError("this store was built without recall; it cannot search")
        return self._recaller.recall(self._tenant, query, k=k)

    def memories(self, where: MemoryFilter | None = None) -> list[Memory]:
        return self._reader.memories(self._tenant, where)

    def write(
        self, event: MemoryEvent, *, on_durable: Callable[[], None] | None = None
    ) -> WriteOutcome:
        check_tenant(event, self._tenant)
        self._send(event, on_durable)
        return WriteOutcome(event.id, lambda: memory_ids_of(event))


class EventSourcedStores:
    """The tenant -> store resolver over one deployment's Kafka and Redis (build it with
    `Deployment.stores()`)."""

    def __init__(
        self,
        publisher: BackgroundPublisher,
        topics: Topics,
        *,
        reader: MemoryReader,
        recaller: Recaller,
        embedding_model: str,
        keyring: Keyring | None = None,
    ) -> None:
        self.publisher = publisher
        self._keyring = keyring
        self._topics = topics
        self._reader = reader
        self._recaller = recaller
        self._embedding_model = embedding_model
        self.monitor = KafkaMonitor(publisher, topics, also=LoggingMonitor())

    def __call__(self, tenant: str) -> EventSourcedMemoryStore:
        return EventSourcedMemoryStore(
            tenant,
            send=self._send,
            reader=self._reader,
            embedding_model=self._embedding_model,
            recaller=self._recaller,
        )

    def _send(self, event: MemoryEvent, on_durable: Callable[[], None] | None) -> None:
        # Encoded and sealed on the publisher's thread: the turn only takes a buffer slot.
        self.publisher.submit(
            lambda: event_record(self._topics, event, self._keyring),
            keyed(self._keyring, on_durable),
        )

    def close(self, timeout: float = 10.0) -> None:
        self.publisher.close(timeout)


def keyed(
    keyring: Keyring | None, on_durable: Callable[[], None] | None
) -> Callable[[], None] | None:
    """`on_durable`, told only once the event's data key is durable too: a key made while
    Kafka was away may still wait in the keys producer when the event is acknowledged, and
    an event whose key is lost is lost. Not told (the key still not acknowledged after
    RIDE_OUT_S), the effect stays started in the journal and recovery sends the event again."""
    if keyring is None or on_durable is None:
        return on_durable

    def durable() -> None:
        try:
            if keyring.unconfirmed:
                keyring.confirm(RIDE_OUT_S)
        except KafkaUnavailableError as exc:
            log.warning("an event is in Kafka but its data key is not yet: %s", exc)
            return
        on_durable()

    return durable
