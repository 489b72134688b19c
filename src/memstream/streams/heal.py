"""Healing: the live projection catches up by itself when Redis lost writes it had acknowledged.

The worker commits a batch's offsets to Kafka once the batch is applied to Redis, and Redis
keeps its data in an append-only file fsynced every second. A Redis crash (or a restore from
an older copy) can therefore lose writes whose offsets Kafka already holds as committed, and
the consumer would never read those events again. The projection records, in the same Lua
script as the memories, the last offset of each partition it has taken into account, so the
loss is visible: Redis's position is behind what the worker knows was consumed.

`Healer` wraps the worker's Projector and compares the two:
- with each batch, Redis's position of each partition in the batch with the batch's first
  offset (the batch after an assignment starts at Kafka's committed offset): the apply script
  compares them in the step that writes, and refuses a batch that would land after a gap;
- after an assignment, and then every `check()` (the worker's timer, about once a second),
  Redis's position with the committed offset of each assigned partition, and with the last
  offset this worker projected — which catches a Redis that restarted under a running worker
  while its partitions are idle.
Where Redis is behind, it reads the missing offsets again from Kafka with a group-less
consumer and projects them before going on. Apply-once makes the overlap harmless: an event
Redis did keep is a no-op. Nothing is replayed beyond the gap.

With the projection sharded (docs/scaling.md) each shard has its Healer over its own writer:
`ShardHealers` splits every batch by the shard of its partitions and projects the shards'
parts at the same time, so positions, gaps and healing stay each shard's own. After a reshard
the same healing fills a partition's new shard with what its old one took in meanwhile.

A shard that stops answering holds only its own partitions. Its projector fails fast on
Redis (streams.projector), and the shard is marked down: its part of this batch and of every
batch after it is taken as consumed without being projected (`Healer.defer`), while the other
shards' parts are projected as usual. The stream acknowledges those messages; the healing
timer tries the shard once a second, and the first check that reaches it reads everything it
lacks again from the log (up to what was consumed), in order, and marks it up. A worker that
crashes meanwhile loses nothing either: its successor compares the shard's positions with the
committed offsets, as after any Redis loss. With a single shard there is nothing else to
project, and the batch is held until Redis answers, as it always was.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from memstream.errors import InfrastructureError, KafkaUnavailableError, RedisUnavailableError
from memstream.memory.ports import (
    AppliedOutcome,
    Generations,
    Position,
    PositionsBehind,
    ProjectionWriter,
    ShardLayout,
    ShardWriters,
)
from memstream.streams.admin import KafkaAdmin
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import Prepared, Projector, RawMessage

__all__ = ["Healer", "KafkaLog", "LogSource", "ShardBatch", "ShardHealers"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_CHUNK = 256
# A re-read that moves no further for this long gives up, to be tried again.
_STALL_S = 30.0
# Backoff while the only shard's Redis is down (the batch is held: there is nothing else).
_FIRST_RETRY_S = 0.2
_MAX_RETRY_S = 10.0


class LogSource(Protocol):
    """Where a healer reads the log again, and what the consumer group has committed."""

    async def committed(self, partitions: Collection[Position]) -> dict[str, int]:
        """The last consumed offset (committed - 1) of each partition that has one."""
        ...

    def read(
        self, topic: str, partition: int, first: int, last: int
    ) -> AsyncIterator[list[RawMessage]]:
        """The messages at offsets `first`..`last` (inclusive) of one partition, in chunks."""
        ...


class KafkaLog:
    """The memory topic read again by a group-less consumer; the worker group's commits."""

    def __init__(self, kafka: KafkaConnection, group: str, *, stall_s: float = _STALL_S) -> None:
        self._kafka = kafka
        self._group = group
        self._stall_s = stall_s

    async def committed(self, partitions: Collection[Position]) -> dict[str, int]:
        wanted = [TopicPartition(p.topic, p.partition) for p in partitions]
        async with KafkaAdmin(self._kafka, "read the worker group's offsets") as admin:
            offsets = await admin.call(
                f"read the committed offsets of group {self._group}",
                lambda client: client.list_consumer_group_offsets(self._group, partitions=wanted),
            )
        return {
            f"{tp.topic}/{tp.partition}": meta.offset - 1
            for tp, meta in offsets.items()
            if meta.offset > 0
        }

    async def read(
        self, topic: str, partition: int, first: int, last: int
    ) -> AsyncIterator[list[RawMessage]]:
        tp = TopicPartition(topic, partition)
        consumer = AIOKafkaConsumer(
            **self._kafka.aiokafka(),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # the gap's start may be gone: read what is left
        )
        doing = f"read {topic}/{partition} again"
        try:
            async with asyncio.timeout(self._stall_s):
                await consumer.start()
                consumer.assign([tp])
                consumer.seek(tp, first)
                end = min(last + 1, (await consumer.end_offsets([tp]))[tp])
            # The healer holds its lock while it reads: a partition that gives nothing (its
            # leader gone with a broker) must end the read, or the worker projects nothing
            # for as long as it lasts. The caller retries with a fresh consumer.
            position, progress_at = first, time.monotonic()
            while position < end:
                async with asyncio.timeout(self._stall_s):
                    batches = await consumer.getmany(tp, timeout_ms=500, max_records=_CHUNK)
                    now_at = await consumer.position(tp)
                chunk = [RawMessage.of(r) for r in batches.get(tp, []) if r.offset <= last]
                if now_at > position:
                    position, progress_at = now_at, time.monotonic()
                elif time.monotonic() - progress_at > self._stall_s:
                    raise KafkaUnavailableError(
                        f"could not {doing}: no message past offset {position} of {end} "
                        f"came in {self._stall_s:.0f}s from Kafka at {self._kafka.where}; "
                        "the worker retries. Check that the broker runs (`memstream status`)."
                    )
                if chunk:
                    yield chunk
        except TimeoutError:
            raise KafkaUnavailableError(
                f"could not {doing}: Kafka at {self._kafka.where} did not answer in "
                f"{self._stall_s:.0f}s; the worker retries. Check that the broker runs "
                "(`memstream status`)."
            ) from None
        except KafkaError as exc:
            raise self._unavailable(doing, exc) from exc
        finally:
            await consumer.stop()

    def _unavailable(self, doing: str, exc: KafkaError) -> KafkaUnavailableError:
        return KafkaUnavailableError(
            f"could not {doing} on Kafka at {self._kafka.where}: {exc!r}; the worker retries. "
            "Check that the broker runs (`memstream status`)."
        )


class Healer:
    """The live worker's projector, with Redis's positions kept in step with the log."""

    def __init__(self, projector: Projector, writer: ProjectionWriter, source: LogSource) -> None:
        self._projector = projector
        self._writer = writer
        self._source = source
        self._lock = asyncio.Lock()  # the stream's batches and the timer's checks take turns
        self._consumed: dict[str, int] = {}  # partition -> last offset this worker consumed
        self._unchecked: dict[str, Position] = {}  # assigned, committed offset not read yet
        self._started = False

    async def start(self) -> None:
        """Prepare the projector's index; RedisUnavailableError when its Redis is down and the
        projector fails fast (then `check` prepares it, once the Redis answers)."""
        await self._projector.start()
        self._started = True

    def assigned(self, partitions: Collection[Position]) -> None:
        """Partitions the group gave this worker: compare them with their committed offsets."""
        for position in partitions:
            self._unchecked[position.field] = position

    def last_consumed(self, field: str) -> int | None:
        """The last offset of partition `field` this worker consumed (-1: none, nothing was
        committed either); None while its committed offset is not read yet (metrics)."""
        if field in self._unchecked:
            return None
        return self._consumed.get(field, -1)

    def revoked(self, partitions: Collection[Position]) -> None:
        """Partitions taken away: their new owner checks them."""
        for position in partitions:
            self._consumed.pop(position.field, None)
            self._unchecked.pop(position.field, None)

    async def project(self, messages: Sequence[RawMessage]) -> list[AppliedOutcome]:
        """Project a batch of the stream, after whatever Redis lost before it."""
        return await self.commit(await self.prepare(messages))

    async def prepare(self, messages: Sequence[RawMessage]) -> Prepared:
        """The batch decoded and embedded, nothing written: the worker prepares a batch while
        Redis applies the one before (`Overlapping`)."""
        return await self._projector.prepare(messages)

    async def commit(self, prepared: Prepared) -> list[AppliedOutcome]:
        """Apply a prepared batch, after whatever Redis lost before it: the gap is looked for
        here, once the batch before is applied, not when this one was prepared, and by the
        apply itself (`follows`: no round trip of its own), which refuses a batch that would
        land after a gap; the gap is then read again and the batch applied after it."""
        async with self._lock:
            messages = prepared.messages
            first: dict[str, RawMessage] = {}
            for message in messages:
                first.setdefault(message.position.field, message)
            follows = {f: m.offset - 1 for f, m in first.items()}
            if not prepared.batch:  # no apply script to look at the positions: read them
                await self._projector.retrying(
                    "healing the projection", lambda: self._fill(follows)
                )
            while True:
                try:
                    outcomes = await self._projector.commit(prepared, follows=follows)
                    break
                except PositionsBehind:
                    await self._projector.retrying(
                        "healing the projection", lambda: self._fill(follows)
                    )
            for message in messages:
                field = message.position.field
                self._consumed[field] = max(self._consumed.get(field, -1), message.offset)
            return outcomes

    def defer(self, messages: Sequence[RawMessage]) -> None:
        """Take `messages` as consumed without projecting them: their shard is down, and
        `check` (or the next batch of their partition) reads them again from the log."""
        for message in messages:
            self.consumed(message.position.field, message.offset)

    def consumed(self, field: str, offset: int) -> None:
        """This worker consumed partition `field` up to `offset`, projected elsewhere or not
        at all (a reshard moved it here): `check` reads what Redis lacks of it again."""
        self._consumed[field] = max(self._consumed.get(field, -1), offset)

    async def check(self) -> bool:
        """Heal every partition this worker holds where Redis is behind (the timer's job);
        whether Redis now holds everything this worker consumed."""
        async with self._lock:
            try:
                if not self._started:
                    await self.start()
                if self._unchecked:
                    unchecked = dict(self._unchecked)
                    committed = await self._source.committed(unchecked.values())
                    for field, offset in committed.items():
                        if field in unchecked:
                            self._consumed[field] = max(self._consumed.get(field, -1), offset)
                    for field in unchecked:
                        self._unchecked.pop(field, None)
                await self._fill(dict(self._consumed))
            except InfrastructureError as exc:  # the next tick tries again
                log.warning("checking the projection against the log failed: %s", exc)
                return False
            return True

    async def catch_up(self, upto: Mapping[str, int]) -> None:
        """Project every offset the projection lacks up to `upto` (per partition), from the
        log: how a reshard fills a partition's new shard before the switch."""
        async with self._lock:
            await self._projector.retrying("catching up with the log", lambda: self._fill(upto))

    async def _fill(self, upto: Mapping[str, int]) -> None:
        """Read again and project every offset Redis lacks up to `upto` (per partition)."""
        if not upto:
            return
        positions = await self._writer.positions()
        for field, last in upto.items():
            have = positions.get(field, -1)
            if have >= last:
                continue
            topic, _, partition = field.rpartition("/")
            log.warning(
                "the projection of %s is at offset %d but %d was consumed (Redis lost "
                "writes): reading %d..%d again",
                field,
                have,
                last,
                have + 1,
                last,
            )
            held = have
            async for chunk in self._source.read(topic, int(partition), have + 1, last):
                await self._projector.project(chunk)
                held = chunk[-1].offset
            # Offsets without a message (transaction markers, a deleted log start) count too,
            # if Redis still holds what was just read again.
            await self._writer.advance({field: last}, held={field: held})


@dataclass(frozen=True, slots=True)
class ShardBatch:
    """A batch `ShardHealers.prepare` split by shard: each part's shard (URL), its messages,
    and what its healer prepared of them (None: the shard was down, the part is deferred);
    `alone` when the layout has one shard (its part is held until Redis answers); `layout`,
    the version of the layout it was split by."""

    parts: tuple[tuple[str, tuple[RawMessage, ...], Prepared | None], ...]
    alone: bool
    layout: int


class ShardHealers:
    """The live worker's healers, one per projection shard of the layout now (`writers`
    follows a newer stored layout without a restart): a batch spanning partitions spans
    shards, and each shard's part goes to that shard's healer, the shards at once. When the
    layout changes, each partition this worker holds that moved is handed from its old shard's
    healer to its new shard's, which heals the new shard from the log (what the old one took
    in after a reshard's warm-up) before its first batch there."""

    def __init__(
        self,
        writers: ShardWriters,
        projector: Callable[[ProjectionWriter, Generations], Projector],
        source: LogSource,
    ) -> None:
        self._writers = writers
        self._projector = projector
        self._source = source
        self._layout: ShardLayout | None = None
        self._healers: dict[str, Healer] = {}  # by the shard's URL
        self._held: dict[str, Position] = {}  # assigned to this worker, by field
        self._down: set[str] = set()  # shards that failed: their parts wait for healing
        self._following = asyncio.Lock()

    async def start(self) -> None:
        """Start the projector of every shard of the layout (each prepares its index)."""
        await self._follow()

    async def _follow(self) -> ShardLayout:
        """The layout now; on a newer one, its shards' healers made and the moved partitions
        handed over."""
        async with self._following:
            layout = self._writers.current_layout()
            if self._layout is not None and layout.version == self._layout.version:
                return layout
            for url in layout.urls:
                if url not in self._healers:
                    writer, generations = self._writers.live_writer(url)
                    healer = Healer(self._projector(writer, generations), writer, self._source)
                    self._healers[url] = healer
                    if layout.count == 1:
                        await _holding("preparing the index", healer.start)
                    else:
                        await self._on_shard(url, healer.start)
            old = self._layout
            if old is None:  # assigned before the first layout was read
                for url, own in self._split(self._held.values(), layout).items():
                    self._healers[url].assigned(own)
            else:
                for position in self._held.values():
                    was, now = old.url_of(position.partition), layout.url_of(position.partition)
                    if was != now:
                        log.info("%s moved to shard %s: healing it there", position.field, now)
                        # What this worker consumed of it, not only what Kafka has committed
                        # (seconds behind): the new shard must get all that the old one did.
                        consumed = self._healers[was].last_consumed(position.field)
                        self._healers[was].revoked([position])
                        self._healers[now].assigned([position])
                        if consumed is not None and consumed >= 0:
                            self._healers[now].consumed(position.field, consumed)
            self._layout = layout
            return layout

    def _split(
        self, positions: Collection[Position], layout: ShardLayout
    ) -> dict[str, list[Position]]:
        by_shard: dict[str, list[Position]] = {}
        for position in positions:
            by_shard.setdefault(layout.url_of(position.partition), []).append(position)
        return by_shard

    def assigned(self, partitions: Collection[Position]) -> None:
        self._held |= {position.field: position for position in partitions}
        if self._layout is not None:  # else the first `_follow` hands them out
            for url, own in self._split(partitions, self._layout).items():
                self._healers[url].assigned(own)

    def revoked(self, partitions: Collection[Position]) -> None:
        for position in partitions:
            self._held.pop(position.field, None)
        if self._layout is not None:
            for url, own in self._split(partitions, self._layout).items():
                self._healers[url].revoked(own)

    def last_consumed(self, field: str) -> int | None:
        if self._layout is None:
            return None
        url = self._layout.url_of(int(field.rpartition("/")[2]))
        return self._healers[url].last_consumed(field)

    @property
    def down(self) -> frozenset[str]:
        """The shards (by URL) whose partitions wait for them to answer again."""
        return frozenset(self._down)

    async def project(self, messages: Sequence[RawMessage]) -> list[AppliedOutcome]:
        """Each shard's messages (in the log's order) projected to it, the shards at once;
        a shard that is down gets its part deferred to healing (module docstring)."""
        return await self.commit(await self.prepare(messages))

    async def prepare(self, messages: Sequence[RawMessage]) -> ShardBatch:
        """The batch split by shard (the layout now), each part prepared by its shard's healer
        (none for a shard that is down: its part waits for healing)."""
        layout = await self._follow()
        if layout.count == 1:
            healer = self._healers[layout.urls[0]]
            prepared = await _holding("preparing", lambda: healer.prepare(messages))
            return ShardBatch(
                ((layout.urls[0], tuple(messages), prepared),), alone=True, layout=layout.version
            )
        by_shard: dict[str, list[RawMessage]] = {}
        for message in messages:
            by_shard.setdefault(layout.url_of(message.partition), []).append(message)
        parts = await asyncio.gather(*(self._prepare_on(url, own) for url, own in by_shard.items()))
        return ShardBatch(tuple(parts), alone=False, layout=layout.version)

    async def _prepare_on(
        self, url: str, messages: Sequence[RawMessage]
    ) -> tuple[str, tuple[RawMessage, ...], Prepared | None]:
        healer = self._healers[url]
        prepared = None
        if url not in self._down:
            prepared = await self._on_shard(url, lambda: healer.prepare(messages))
        return url, tuple(messages), prepared

    async def commit(self, batch: ShardBatch) -> list[AppliedOutcome]:
        """Apply each shard's prepared part to it, the shards at once (a single shard: held
        until its Redis answers)."""
        if batch.alone:
            ((url, _, prepared),) = batch.parts
            assert prepared is not None  # a single shard's part is held, never deferred
            healer = self._healers[url]
            outcomes = await _holding("projecting", lambda: healer.commit(prepared))
        else:
            done = await asyncio.gather(*(self._commit_on(*part) for part in batch.parts))
            outcomes = [outcome for applied in done for outcome in applied]
        layout = self._layout
        if layout is not None and layout.version != batch.layout:
            # Split before a reshard's switch and applied after it: the moved partitions'
            # messages went to their old shards, and their new ones read them from the log.
            for url, messages, _ in batch.parts:
                for message in messages:
                    now = layout.url_of(message.partition)
                    if now != url:
                        self._healers[now].consumed(message.position.field, message.offset)
        return outcomes

    async def _commit_on(
        self, url: str, messages: Sequence[RawMessage], prepared: Prepared | None
    ) -> list[AppliedOutcome]:
        healer = self._healers[url]
        if prepared is not None and url not in self._down:
            applied = await self._on_shard(url, lambda: healer.commit(prepared))
            if applied is not None:
                return applied
        healer.defer(messages)
        return []

    async def _on_shard(self, url: str, attempt: Callable[[], Awaitable[T]]) -> T | None:
        """`attempt()` on shard `url`; None, and the shard marked down, when it fails."""
        try:
            return await attempt()
        except RedisUnavailableError as exc:
            if url not in self._down:
                log.warning(
                    "shard %s is down: its partitions wait for it, the others go on: %s",
                    self._layout_index(url),
                    exc,
                )
            self._down.add(url)
            return None

    def _layout_index(self, url: str) -> str:
        urls = self._layout.urls if self._layout is not None else ()
        return str(urls.index(url)) if url in urls else "(new)"

    async def check(self) -> None:
        """Follow a newer layout, and heal every shard where Redis is behind; a shard that
        was down and is healed is up again."""
        try:
            layout = await self._follow()
        except InfrastructureError as exc:  # a new shard not answering: the next tick
            log.warning("following the shard layout failed: %s", exc)
            return
        await asyncio.gather(*(self._check(url) for url in layout.urls))

    async def _check(self, url: str) -> None:
        if await self._healers[url].check() and url in self._down:
            self._down.discard(url)
            log.info("shard %s answers again and holds all it was sent", self._layout_index(url))


async def _holding(doing: str, attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt()`, again with backoff for as long as the one Redis is down."""
    delay = _FIRST_RETRY_S
    while True:
        try:
            return await attempt()
        except RedisUnavailableError as exc:
            log.warning("%s failed, retrying in %.1fs: %s", doing, delay, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_RETRY_S)
