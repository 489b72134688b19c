"""Publishing without waiting: the agent side's producer (`BackgroundPublisher`), a bounded
buffer drained into Kafka outside the Python interpreter's lock. (The producer that waits for
the broker's acknowledgement is streams.event_publisher's.)

The agent's hooks must not wait for the broker (after_agent adds well under a millisecond to a
turn), yet nothing may be lost silently. `BackgroundPublisher.submit` hands a message to
librdkafka (confluent-kafka), whose own threads batch, send and retry it through an idempotent
producer (acks=all) without holding the GIL — an asyncio producer in a Python thread would
compete with the agent for the GIL and cost whole milliseconds at the tail (`memstream bench
hook`; the figures are in docs/benchmarks.md). A poller thread runs each
message's `on_durable` once the broker has acknowledged it.

While Kafka is unreachable messages wait in the bounded buffer, with no time limit; when the
buffer is full, `submit` raises KafkaUnavailableError at once and the caller announces what
it skipped. A message still buffered when the process dies is not lost for good: its effect
was journaled as started but never as applied, so `recover` sends it again (with the same
event id, which the projection applies once).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from memstream.errors import KafkaUnavailableError
from memstream.streams.kafka import KafkaConnection
from memstream.streams.wire import Record, producer_config

__all__ = ["BackgroundPublisher", "Build"]

log = logging.getLogger(__name__)

Build = Callable[[], Record]


class BackgroundPublisher:
    def __init__(self, kafka: KafkaConnection, *, capacity: int = 10_000) -> None:
        self._kafka = kafka
        self._capacity = capacity
        self._producer = Producer(
            producer_config(
                kafka,
                "librdkafka",
                {
                    # No linger: a write that waits for its acknowledgement (a store's put)
                    # would wait the linger out too, which was most of a put's time at 2 ms;
                    # under load, librdkafka batches what queues while earlier requests are
                    # in flight anyway (docs/benchmarks.md, "store").
                    "linger.ms": 0,
                    # The bound is enforced by `submit` (below), exactly; librdkafka's own
                    # queue is only kept from being the tighter limit.
                    "queue.buffering.max.messages": capacity + 1000,
                    # 0: no delivery deadline. A message waits for the broker however long it
                    # is away; the buffer's bound, not a clock, decides when turns start
                    # skipping.
                    "message.timeout.ms": 0,
                    "error_cb": self._on_error,
                    "logger": log,
                },
            )
        )
        # What the buffer holds is counted here, not asked of librdkafka: len(producer) also
        # counts error events waiting to be polled, so it is no count of messages.
        self._held = 0
        self._unbuilt = 0  # submitted, not yet handed to librdkafka
        self._acknowledged = 0  # read by the metrics (memstream_messages_acknowledged)
        self._lock = threading.Lock()
        self._built = threading.Condition(self._lock)
        self._queue: SimpleQueue[tuple[Record | Build, Callable[[], None] | None] | None] = (
            SimpleQueue()
        )
        self._stopping = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="memstream-publisher", daemon=True)
        self._poller.start()
        self._builder = threading.Thread(target=self._build, name="memstream-encoder", daemon=True)
        self._builder.start()

    def submit(self, record: Record | Build, on_durable: Callable[[], None] | None = None) -> None:
        """Queue a record, or a function that builds it; raise KafkaUnavailableError if the
        buffer is full.

        A function is called on the publisher's own thread, in submission order: encoding and
        sealing an event (and a tenant's first data key, a round trip to the keys topic) stay
        off the caller's path, which only takes a slot in the buffer.
        """
        with self._lock:
            full = self._held >= self._capacity
            if not full:
                self._held += 1
                self._unbuilt += 1
        if full:
            raise KafkaUnavailableError(
                f"the publish buffer ({self._capacity} messages) is full: Kafka at "
                f"{self._kafka.where} has not acknowledged messages for a while. This message "
                "was not queued; check the broker (`memstream status`)."
            )
        self._queue.put((record, on_durable))

    def flush(self, timeout: float) -> bool:
        """Wait until every queued message is acknowledged; False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        with self._built:
            if not self._built.wait_for(lambda: self._unbuilt == 0, timeout):
                return False
        return int(self._producer.flush(max(deadline - time.monotonic(), 0))) == 0

    @property
    def pending(self) -> int:
        """Messages queued and not yet acknowledged (or dropped)."""
        return self._held

    @property
    def capacity(self) -> int:
        """The most messages the buffer holds before `submit` refuses."""
        return self._capacity

    @property
    def acknowledged(self) -> int:
        """Messages the broker has acknowledged since this publisher started."""
        return self._acknowledged

    def _release(self) -> None:
        with self._lock:
            self._held -= 1

    def _acknowledge(self) -> None:
        # Only the poller thread calls this, so the count needs no lock.
        self._acknowledged += 1

    def close(self, timeout: float = 10.0) -> None:
        """Send what is queued (up to `timeout`), then stop the poller.

        Messages still unacknowledged then are dropped: their effects stay "started" in the
        journal, so recovering those runs sends them again.
        """
        self.flush(timeout)
        self._queue.put(None)  # the builder stops after what is queued before it
        self._builder.join(timeout)
        self._producer.purge()  # what Kafka did not take by now is dropped, not retried forever
        self._producer.flush(0)
        self._stopping.set()
        self._poller.join(timeout)

    def _build(self) -> None:
        while (item := self._queue.get()) is not None:
            record, on_durable = item
            try:
                built = record if isinstance(record, Record) else record()
                self._producer.produce(
                    built.topic,
                    built.value,
                    built.key,
                    headers=list(built.headers) or None,
                    on_delivery=_delivered(on_durable, self._release, self._acknowledge),
                )
            except Exception:
                # Not sent: its effect stays "started" in the journal, so the run's recovery
                # sends it again.
                self._release()
                log.exception("a record was not queued for Kafka at %s", self._kafka.where)
            finally:
                with self._built:
                    self._unbuilt -= 1
                    if not self._unbuilt:
                        self._built.notify_all()
            # Let a waiting agent thread have the interpreter between two records: draining a
            # backlog would otherwise hold it for a whole switch interval (5 ms) at a time.
            time.sleep(0)

    def _poll(self) -> None:
        # Delivery callbacks run here; poll releases the GIL while it waits.
        while not self._stopping.is_set():
            self._producer.poll(0.1)

    def _on_error(self, error: KafkaError) -> None:
        log.warning("Kafka at %s: %s (messages wait in the buffer)", self._kafka.where, error)


def _delivered(
    on_durable: Callable[[], None] | None,
    release: Callable[[], None],
    acknowledge: Callable[[], None],
) -> Callable[[Any, Message], None]:
    def delivered(error: Any, message: Message) -> None:
        release()  # delivered or dropped, the message no longer takes room in the buffer
        if error is not None and error.code() == KafkaError._PURGE_QUEUE:
            return  # dropped on close: the effect stays "started" for recovery
        if error is not None:
            # Only non-retriable errors end here (a missing topic, a message too large): the
            # effect stays "started" in the journal, so the run's recovery can send it again.
            log.error("Kafka did not take a message for %s: %s", message.topic(), error)
            return
        acknowledge()
        if on_durable is not None:
            try:
                on_durable()
            except Exception:  # a callback's failure must not stop the poller
                log.exception("on_durable callback failed")

    return delivered
