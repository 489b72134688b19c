"""A job that follows the memory topic in a consumer group of its own, off the hot path.

The extraction job and the summary-view job each read every record of the memory topic beside
the projection, act on the few that concern them (asking a model, which may be slow), and
write what they decide back to the log. `LogFollower` is what they share: the consumer, a task
per record (so one slow record holds no other), and commits that never pass a record still
being worked on, so a crash re-reads at most what was in flight (which each job then finds
done, by the ids of what it writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from memstream.memory.ports import Identified, ProjectionProgress
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import RawMessage

__all__ = ["LogFollower", "Offsets", "until_applied"]

log = logging.getLogger(__name__)

Handle = Callable[[RawMessage], Awaitable[object]]

_RETRY_FIRST_S, _RETRY_MAX_S = 1.0, 60.0
# A job acts on few of the records it reads, and then asks a model, which answers in seconds:
# the broker may gather records for up to 250 ms a fetch. Asking again for every record, as a
# consumer does by default, cost the worker's event loop (the projection's too) a socket write
# a turn, a quarter of the loop's CPU at 140 turns/s (py-spy), and the projection's freshness under
# load (docs/benchmarks.md, issue 37).
_FETCH_MIN_BYTES, _FETCH_MAX_WAIT_MS = 1 << 20, 250
_COMMIT_EVERY_S = 1.0
_MAX_IN_FLIGHT = 512  # messages read but not finished, across partitions: then it stops reading
# How often a record read ahead of the projection asks whether it is applied, and how often
# the job says it is still waiting.
_APPLIED_POLL_S, _APPLIED_SAY_S = 0.05, 30.0


async def until_applied(progress: ProjectionProgress, event: Identified, job: str) -> None:
    """Return once the live projection has applied `event`: a job reads the log beside the
    worker, and may be ahead of it."""
    loop = asyncio.get_running_loop()
    say_at = loop.time() + _APPLIED_SAY_S
    while await asyncio.to_thread(progress.unapplied, [event]):  # polled
        await asyncio.sleep(_APPLIED_POLL_S)
        if loop.time() >= say_at:
            log.warning("%s waits for the projection to apply %s", job, event.id)
            say_at += _APPLIED_SAY_S


class Offsets:
    """Per partition, the offsets read and not yet finished: what may be committed is the
    first unfinished one (or one past the last read, when none is)."""

    def __init__(self) -> None:
        self._open: dict[TopicPartition, set[int]] = {}
        self._next: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}

    def read(self, where: TopicPartition, offset: int) -> None:
        self._open.setdefault(where, set()).add(offset)
        self._next[where] = max(self._next.get(where, 0), offset + 1)

    def done(self, where: TopicPartition, offset: int) -> None:
        self._open.get(where, set()).discard(offset)

    def keep_only(self, held: Collection[TopicPartition]) -> None:
        """Forget the partitions not in `held`: taken away, their new holder commits them."""
        for where in [w for w in self._next if w not in held]:
            self._open.pop(where, None)
            self._next.pop(where, None)
            self._committed.pop(where, None)

    @property
    def in_flight(self) -> int:
        return sum(len(offsets) for offsets in self._open.values())

    def committable(self) -> dict[TopicPartition, int]:
        """Partitions whose commit point moved since it was last `committed`, with that point."""
        points = {
            where: min(self._open.get(where) or {after}) for where, after in self._next.items()
        }
        return {w: p for w, p in points.items() if self._committed.get(w) != p}

    def committed(self, points: Mapping[TopicPartition, int]) -> None:
        self._committed.update(points)


class LogFollower:
    """Reads `topic` in consumer group `group` and calls `handle` on every record, each in a
    task of its own; `name` says which job it is in the logs."""

    def __init__(
        self, kafka: KafkaConnection, topic: str, group: str, handle: Handle, *, name: str
    ) -> None:
        self._kafka = kafka
        self._topic = topic
        self._group = group
        self._handle = handle
        self._name = name
        self._offsets = Offsets()
        self._working: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Follow until cancelled. A broker failure restarts the consumer after a pause (what
        was in flight is read again from the last commit)."""
        pause = _RETRY_FIRST_S
        while True:
            try:
                await self._run_once()
            except KafkaError as exc:
                log.warning("%s's consumer failed (%s); starting again in %.0fs", self._name,
                            exc, pause)  # fmt: skip
                await asyncio.sleep(pause)
                pause = min(pause * 2, _RETRY_MAX_S)

    async def _run_once(self) -> None:
        consumer = AIOKafkaConsumer(
            self._topic,
            group_id=self._group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_min_bytes=_FETCH_MIN_BYTES,
            fetch_max_wait_ms=_FETCH_MAX_WAIT_MS,
            **self._kafka.aiokafka(),
        )
        try:
            await consumer.start()
            await self._consume(consumer)
        finally:
            for task in self._working:
                task.cancel()
            await asyncio.gather(*self._working, return_exceptions=True)
            with contextlib.suppress(KafkaError):
                await self._commit(consumer)
            self._offsets.keep_only(())
            await consumer.stop()

    async def _consume(self, consumer: AIOKafkaConsumer) -> None:
        last_commit = asyncio.get_running_loop().time()
        while True:
            # Saturated: stop fetching, but keep polling, so the group keeps this member.
            held = consumer.assignment()
            if self._offsets.in_flight >= _MAX_IN_FLIGHT:
                consumer.pause(*held)
            else:
                consumer.resume(*held)
            batches = await consumer.getmany(timeout_ms=200, max_records=100)
            for where, records in batches.items():
                for record in records:
                    self._offsets.read(where, record.offset)
                    message = RawMessage.of(record)
                    task = asyncio.ensure_future(self._finish(where, message))
                    self._working.add(task)
                    task.add_done_callback(self._working.discard)
            now = asyncio.get_running_loop().time()
            if now - last_commit >= _COMMIT_EVERY_S:
                await self._commit(consumer)
                last_commit = now

    async def _commit(self, consumer: AIOKafkaConsumer) -> None:
        """Commit each held partition up to its first unfinished message; a failed commit
        (a rebalance under way) is tried again at the next one."""
        self._offsets.keep_only(consumer.assignment())
        moved = self._offsets.committable()
        if not moved:
            return
        try:
            await consumer.commit(moved)
        except CommitFailedError as exc:
            log.info("%s's commit waits for the group to settle: %s", self._name, exc)
            return
        self._offsets.committed(moved)

    async def _finish(self, where: TopicPartition, message: RawMessage) -> None:
        try:
            await self._handle(message)
        except asyncio.CancelledError:
            raise
        except Exception:  # one message's bug must not stop the job
            log.exception("%s of %s/%d@%d failed; skipped", self._name, message.topic,
                          message.partition, message.offset)  # fmt: skip
        self._offsets.done(where, message.offset)
