"""The keys topic: tenants' data keys, wrapped by the master key, and their destruction.

    {ns}.keys   compacted, one partition. Record key ["tenant", "key id"]: a wrapped data
                key (memory.cipher.KeyRecord); a tombstone destroys it. Record key
                ["tenant", "erased"]: the ids an erasure destroyed, kept (no secret in it) so a
                reader can tell an erased key from an unknown one after compaction.

Why a topic (docs/erasure.md): replay must find the keys wherever it finds the log, and
compaction is how a Kafka deployment already forgets a record for good; one partition keeps
"the tenant's first key" the same for every reader (the lowest offset).

`KafkaKeyring` reads the topic to its end on first use, and again whenever it is asked for a
key it does not know (a key is written, and acknowledged, before any event is sealed under it,
so one read to the end finds it) or its view is older than `stale_s` (how a long-running
producer learns of an erasure: that read runs on a thread of its own, so no turn waits for
it). Creating a tenant's first key: write a record under a fresh key id, read to the end, and
seal with the tenant's first key read — two processes racing both end up on the same one,
and the loser's record is kept too (keyed by its own id), so nothing sealed under it is ever
left without its key until an erasure destroys both.

It is synchronous (confluent-kafka, as the agent side's publisher): on the agent side the
publisher's thread calls it as it seals, outside any turn; the worker and other asyncio
callers pay one short blocking read per new key.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaPartition

from memstream.errors import KafkaUnavailableError
from memstream.memory.cipher import (
    CLOCK_KEY,
    ERASED,
    DataKey,
    KeyringState,
    MasterKeys,
    clock_tick,
    erased_marker,
    new_data_key,
    record_key,
)
from memstream.streams.kafka import RIDE_OUT_S, KafkaConnection
from memstream.streams.topics import Topics
from memstream.streams.wire import producer_config

__all__ = ["KafkaKeyring", "keys_clients"]

log = logging.getLogger(__name__)

# A broker lost is ridden out, not reported (streams.kafka.RIDE_OUT_S).
_TIMEOUT_S = RIDE_OUT_S
# How long sealing may wait for the keys topic when it meets a tenant with no key known here
# (on the agent side, the publisher's thread: the turn itself never waits); beyond it the key
# is made here and its record waits in the producer (Kafka away), and the topic is not asked
# again for _OFFLINE_S.
_HOT_PATH_S = 2.0
_OFFLINE_S = 5.0
_LEADER_MOVING = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    # The client's own metadata has not seen the just-created topic's partition yet.
    KafkaError._UNKNOWN_PARTITION,
    # The broker asked died (or left the metadata) while it was asked: ask the new leader.
    KafkaError._DESTROY_BROKER,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
}


def _passing(error: KafkaError) -> bool:
    """Whether `error` passes once the cluster has moved a partition off a lost broker."""
    return bool(error.retriable()) or error.code() in _LEADER_MOVING


def keys_clients(kafka: KafkaConnection, topics: Topics) -> tuple[Producer, Consumer]:
    """The keys topic's producer and consumer: every Kafka client of this module is made here."""
    producer = Producer(
        producer_config(
            kafka,
            "librdkafka",
            {
                # No delivery deadline: a key made while Kafka is away waits for it, as the
                # events sealed under it do in the agent side's publisher.
                "message.timeout.ms": 0,
                "logger": log,
            },
        )
    )
    consumer = Consumer(
        {
            **kafka.librdkafka(),
            # Assigned, never subscribed, never committed: the group id is only what
            # librdkafka insists on (it still looks up the group's coordinator, so the id is
            # the namespace's, which the ACLs can name: streams/acls.py).
            "group.id": topics.keys_group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            # A refresh waits for the end of the topic: the broker's default long poll (500 ms)
            # would be added to every refresh that finds nothing new.
            "fetch.wait.max.ms": 10,
            "logger": log,
        }
    )
    return producer, consumer


class KafkaKeyring:
    """The Keyring (memory.cipher) over the keys topic of one namespace."""

    def __init__(
        self, kafka: KafkaConnection, topics: Topics, masters: MasterKeys, *, stale_s: float = 30.0
    ) -> None:
        self._kafka = kafka
        self._topics = topics
        self._topic = topics.keys
        self.state = KeyringState(masters)
        self._stale_s = stale_s
        self._clients: tuple[Producer, Consumer] | None = None
        self._next = 0  # the next offset to read
        self._read_at = float("-inf")
        self._offline_until = float("-inf")  # after a failed read, when to try again
        # A key made here while Kafka was away, its record not yet acknowledged (`confirm`).
        self.unconfirmed = False
        # Lock order: _lock (key creation, the clients), then _reading (the consumer and the
        # read position); a refresh holds only _reading while it talks to the broker.
        self._lock = threading.RLock()
        self._reading = threading.Lock()
        self._refresher: threading.Thread | None = None

    # -- the Keyring port ---------------------------------------------------------------------

    def current(self, tenant: str) -> DataKey:
        with self._lock:
            now = time.monotonic()
            if now >= self._offline_until:
                if self._read_at == float("-inf"):
                    # Never read here: learn the tenants' keys before making one.
                    self._try(self.refresh, _HOT_PATH_S)
                elif now - self._read_at > self._stale_s:
                    self._refresh_soon()
            key = self.state.first(tenant)
            if key is not None:
                return key
            record = self.state.masters.wrap(new_data_key(tenant))
            producer = self._producer()
            self._produce(producer, record.record_key, record.encode())
            if time.monotonic() >= self._offline_until and self._try(self._settle, _HOT_PATH_S):
                key = self.state.first(tenant)  # the first key read: racers agree on it
                if key is not None:
                    return key
            # Kafka is away (or an erasure raced the write): the record waits in the producer
            # like the events do, and this process seals with its key at once. A worker that
            # meets the event first waits for the key (Projector, key_wait_s); nothing sealed
            # under it is reported durable before the key is (`confirm`).
            self.unconfirmed = True
            self.state.apply(record.record_key, record.encode())
            key = self.state.first(tenant)
            assert key is not None  # just applied
            return key

    def _refresh_soon(self) -> None:
        """Read the topic again on a thread of its own (keys made or destroyed elsewhere since
        the last read): the turn that noticed the view is stale goes on with it."""
        if self._refresher is not None and self._refresher.is_alive():
            return
        self._refresher = threading.Thread(
            target=self._try,
            args=(self.refresh, _TIMEOUT_S),
            name="memstream-keys-refresh",
            daemon=True,
        )
        self._refresher.start()

    def _settle(self, timeout_s: float) -> None:
        """Wait until what was produced is durable, then read the topic to its end."""
        if self._producer().flush(timeout_s) != 0:
            raise self._unavailable("write a new data key", TimeoutError(f"{timeout_s}s"))
        self.refresh(timeout_s)

    def _try(self, attempt: Callable[[float], None], timeout_s: float) -> bool:
        """`attempt(timeout_s)`; on failure, note Kafka as away for a while and say False (the
        agent's turn does not wait for the broker: docs/erasure.md)."""
        try:
            attempt(timeout_s)
            return True
        except KafkaUnavailableError as exc:
            self._offline_until = time.monotonic() + _OFFLINE_S
            log.warning("data keys: %s; sealing with keys known or made here", exc)
            return False

    def lookup(self, tenant: str, key_id: str) -> DataKey:
        with self._lock:
            if self.state.find(tenant, key_id) is None:
                self.refresh()  # written before any event sealed under it: it is there now
            return self.state.require(tenant, key_id)

    def forget(self, tenant: str, key_ids: Iterable[str]) -> None:
        self.state.forget(tenant, key_ids)

    def confirm(self, timeout_s: float = _TIMEOUT_S) -> None:
        # Only after a key was made while Kafka was away: otherwise every key handed out was
        # read back from the topic, so it is there.
        with self._lock:
            if self.unconfirmed:
                if self._producer().flush(timeout_s) != 0:
                    raise self._unavailable(
                        "write a data key made while Kafka was away",
                        TimeoutError(f"not acknowledged in {timeout_s:.0f}s"),
                    )
                self.unconfirmed = False

    # -- erasure and rotation -----------------------------------------------------------------

    def erase(self, tenant: str) -> list[str]:
        """Destroy every data key of `tenant`: a tombstone each, then the erasure marker naming
        them (and those destroyed before). Returns the ids destroyed now."""
        with self._lock:
            self.refresh()
            ids = self.state.key_ids(tenant)
            producer = self._producer()
            for key_id in ids:
                self._produce(producer, record_key(tenant, key_id), None)
            destroyed = self.state.erased(tenant) | set(ids)
            self._produce(producer, record_key(tenant, ERASED), erased_marker(tenant, destroyed))
            self._flush(producer, "destroy the data keys")
            self.refresh()
            return ids

    def tick(self) -> None:
        """Write the clock record (`memory.cipher.CLOCK_KEY`): a worker's periodic write that
        rolls the active segment once segment.ms has passed, so the tombstones of an erasure
        are compacted, and the wrapped keys deleted from disk, on an idle topic too."""
        with self._lock:
            producer = self._producer()
        self._produce(producer, CLOCK_KEY, clock_tick())
        self._flush(producer, "write the keys topic's clock")

    def rewrap(self) -> int:
        """Write every live data key again, wrapped by the current master key (the last step
        of a rotation; compaction then drops the records wrapped by the old one)."""
        with self._lock:
            self.refresh()
            producer = self._producer()
            count = 0
            for (tenant, key_id), record in self.state.records().items():
                if record.kek_id == self.state.masters.kek_id:
                    continue
                key = self.state.find(tenant, key_id)
                if key is not None:
                    rewrapped = self.state.masters.wrap(key)
                    self._produce(producer, rewrapped.record_key, rewrapped.encode())
                    count += 1
            self._flush(producer, "re-wrap the data keys")
            self.refresh()
            return count

    # -- reading and writing the topic --------------------------------------------------------

    def refresh(self, timeout_s: float = _TIMEOUT_S) -> None:
        """Read the keys topic from where this keyring stopped to its current end."""
        with self._lock:
            _, consumer = self._started()
        with self._reading:
            partition = KafkaPartition(self._topic, 0)
            deadline = time.monotonic() + timeout_s
            try:
                consumer.resume([partition])
                high = self._end(consumer, partition, deadline)
                while self._next < high:
                    if time.monotonic() > deadline:
                        raise KafkaException(f"reading {self._topic} to offset {high} timed out")
                    message = consumer.poll(0.05)
                    if message is None:
                        continue
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            # The end, even where compaction left no record at the last offsets.
                            self._next = max(self._next, message.offset() or 0)
                            continue
                        if _passing(error):
                            continue  # a broker lost: the client fetches from the new leader
                        raise KafkaException(error)
                    self.state.apply(message.key(), message.value())
                    self._next = (message.offset() or 0) + 1
                # Paused between refreshes: an idle consumer would otherwise fetch every
                # fetch.wait.max.ms, on the CPU the agent's turns need.
                consumer.pause([partition])
            except KafkaException as exc:
                raise self._unavailable("read the keys topic", exc) from exc
            self._read_at = time.monotonic()

    @staticmethod
    def _end(consumer: Consumer, partition: KafkaPartition, deadline: float) -> int:
        """The partition's end offset, retrying what Kafka says is retriable (a topic just
        created has no leader for a moment)."""
        while True:
            try:
                left = max(deadline - time.monotonic(), 0.1)
                _, high = consumer.get_watermark_offsets(partition, timeout=left)
                return int(high)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if not (isinstance(error, KafkaError) and _passing(error)):
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)  # the leader election takes milliseconds; nothing to wait on

    def _produce(self, producer: Producer, key: bytes, value: bytes | None) -> None:
        try:
            producer.produce(self._topic, value, key)
        except (BufferError, KafkaException) as exc:
            raise self._unavailable("write the keys topic", exc) from exc

    def _flush(self, producer: Producer, doing: str) -> None:
        if producer.flush(_TIMEOUT_S) != 0:
            raise self._unavailable(doing, TimeoutError(f"not acknowledged in {_TIMEOUT_S}s"))

    def _producer(self) -> Producer:
        producer, _ = self._started()
        return producer

    def _started(self) -> tuple[Producer, Consumer]:
        if self._clients is None:
            producer, consumer = keys_clients(self._kafka, self._topics)
            # Offset 0, not OFFSET_BEGINNING, whose lookup costs librdkafka half a second; a
            # compacted topic keeps offset 0 as its start (out of range: auto.offset.reset).
            consumer.assign([KafkaPartition(self._topic, 0, 0)])
            self._clients = (producer, consumer)
        return self._clients

    def close(self) -> None:
        if self._refresher is not None:
            self._refresher.join(_TIMEOUT_S)
        with self._lock, self._reading:
            if self._clients is not None:
                producer, consumer = self._clients
                left = producer.flush(_TIMEOUT_S)
                if left:
                    # Events sealed under a key among them were never reported durable
                    # (`confirm`): their writers send them again, under a key that is there.
                    log.error(
                        "%d records of %s were not acknowledged in %.0fs and are dropped",
                        left,
                        self._topic,
                        _TIMEOUT_S,
                    )
                consumer.close()
                self._clients = None

    def _unavailable(self, doing: str, exc: Any) -> KafkaUnavailableError:
        return KafkaUnavailableError(
            f"could not {doing} ({self._topic}) on Kafka at {self._kafka.where}: {exc!r}. Check "
            "the broker (`memstream status`), MEMSTREAM_KAFKA_BOOTSTRAP, and that the "
            "namespace's topics exist (a worker, an import or `memstream up --worker` creates "
            "them)."
        )
