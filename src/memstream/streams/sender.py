"""Publishing without waiting: a bounded buffer drained into Kafka by a background thread.

The agent's hooks must not wait for the broker (after_agent adds at most a few milliseconds
to a turn), yet nothing may be lost silently. `BackgroundPublisher.submit` puts a message in a
bounded buffer and returns at once; a thread with its own event loop sends the buffer in
order through an idempotent producer (acks=all) and calls each message's `on_durable` once the
broker has acknowledged it. While Kafka is unreachable the thread keeps retrying with backoff
and messages wait in the buffer; when the buffer is full, `submit` raises
KafkaUnavailableError at once, and the caller announces what it skipped.

A message that was in the buffer when the process died is not lost for good: its effect was
journaled as started but never as applied, so `recover` sends it again (with the same event
id, which the projection applies once).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from memstream.errors import KafkaUnavailableError

__all__ = ["BackgroundPublisher"]

log = logging.getLogger(__name__)

_BATCH = 500
_FIRST_RETRY_S = 0.2
_MAX_RETRY_S = 5.0


@dataclass(frozen=True, slots=True)
class _Outgoing:
    topic: str
    key: bytes
    value: bytes
    on_durable: Callable[[], None] | None


class BackgroundPublisher:
    def __init__(self, bootstrap: str, *, capacity: int = 10_000) -> None:
        self._bootstrap = bootstrap
        self._capacity = capacity
        self._room = threading.BoundedSemaphore(capacity)
        self._idle = threading.Condition()
        self._unacknowledged = 0
        self._loop = asyncio.new_event_loop()
        self._queue: asyncio.Queue[_Outgoing | None] = asyncio.Queue()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="memstream-publisher", daemon=True
        )
        self._thread.start()
        self._task = asyncio.run_coroutine_threadsafe(self._drain(), self._loop)

    def submit(
        self, topic: str, key: bytes, value: bytes, on_durable: Callable[[], None] | None = None
    ) -> None:
        """Queue a message; raise KafkaUnavailableError if the buffer is full."""
        if not self._room.acquire(blocking=False):
            raise KafkaUnavailableError(
                f"the publish buffer ({self._capacity} messages) is full: Kafka at "
                f"{self._bootstrap} has not acknowledged messages for a while. This message "
                "was not queued; check the broker (`memstream status`)."
            )
        with self._idle:
            self._unacknowledged += 1
        self._loop.call_soon_threadsafe(
            self._queue.put_nowait, _Outgoing(topic, key, value, on_durable)
        )

    def flush(self, timeout: float) -> bool:
        """Wait until every queued message is acknowledged; False if `timeout` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._unacknowledged == 0, timeout)

    @property
    def pending(self) -> int:
        with self._idle:
            return self._unacknowledged

    def close(self, timeout: float = 10.0) -> None:
        """Send what is queued (up to `timeout`), then stop the thread.

        Messages still unacknowledged then are dropped: their effects stay "started" in the
        journal, so recovering those runs sends them again.
        """
        self.flush(timeout)
        self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
        try:
            self._task.result(timeout=timeout)
        except TimeoutError:
            self._task.cancel()  # cancels the task in its loop; wait for it to unwind
            concurrent.futures.wait([self._task], timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        self._loop.close()

    async def _drain(self) -> None:
        producer: AIOKafkaProducer | None = None
        delay = _FIRST_RETRY_S
        try:
            while True:
                first = await self._queue.get()
                if first is None:
                    return
                batch = [first]
                while len(batch) < _BATCH and not self._queue.empty():
                    item = self._queue.get_nowait()
                    if item is None:
                        self._queue.put_nowait(None)  # stop after this batch
                        break
                    batch.append(item)
                while True:
                    try:
                        if producer is None:
                            producer = self._producer()
                            await producer.start()
                        sends = [await producer.send(o.topic, o.value, key=o.key) for o in batch]
                        await asyncio.gather(*sends)
                        break
                    except (KafkaError, OSError) as exc:
                        log.warning(
                            "Kafka at %s: %r; retrying in %.1fs", self._bootstrap, exc, delay
                        )
                        if producer is not None:
                            await _stop_quietly(producer)
                            producer = None
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, _MAX_RETRY_S)
                delay = _FIRST_RETRY_S
                for outgoing in batch:
                    self._acknowledged(outgoing)
        finally:
            if producer is not None:
                await _stop_quietly(producer)

    def _producer(self) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            enable_idempotence=True,
            acks="all",
            linger_ms=1,
            request_timeout_ms=10_000,
        )

    def _acknowledged(self, outgoing: _Outgoing) -> None:
        if outgoing.on_durable is not None:
            try:
                outgoing.on_durable()
            except Exception:  # a callback's failure must not stop the sender
                log.exception("on_durable callback failed")
        self._room.release()
        with self._idle:
            self._unacknowledged -= 1
            self._idle.notify_all()


async def _stop_quietly(producer: AIOKafkaProducer) -> None:
    try:
        await producer.stop()
    except (KafkaError, OSError):
        log.debug("producer did not stop cleanly", exc_info=True)
