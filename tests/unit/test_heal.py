"""The healer reads again exactly the offsets Redis lost, and nothing else."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar, cast

from memstream.config import Settings
from memstream.errors import KafkaUnavailableError
from memstream.inmemory.backend import InMemoryProjection
from memstream.memory.ports import (
    AppliedOutcome,
    Embedded,
    Position,
    PositionsBehind,
    ProjectionWriter,
)
from memstream.providers import EmbedderCatalogue
from memstream.providers.minilm import MiniLMEmbedder
from memstream.streams.heal import Healer
from memstream.streams.projector import Prepared, Projector, RawMessage

T = TypeVar("T")
TOPIC = "ns.memory"


def message(partition: int, offset: int) -> RawMessage:
    return RawMessage(TOPIC, partition, offset, b"k", b"v")


class FakeRedis:
    """Positions as the projection records them: moved by projecting and by advance."""

    def __init__(self, positions: dict[str, int]) -> None:
        self.stored = dict(positions)
        self.projected: list[tuple[int, int]] = []
        self.refused = 0  # batches refused for a gap

    async def start(self) -> None:
        pass

    async def positions(self) -> dict[str, int]:
        return dict(self.stored)

    async def advance(
        self,
        positions: Mapping[str, int],
        *,
        into: int | None = None,
        held: Mapping[str, int] | None = None,
    ) -> None:
        for field, offset in positions.items():
            if self.stored.get(field, -1) >= (held or {}).get(field, -1):
                self.stored[field] = max(self.stored.get(field, -1), offset)

    async def project(self, messages: Sequence[RawMessage]) -> list[AppliedOutcome]:
        for m in messages:
            self.projected.append((m.partition, m.offset))
            await self.advance({m.position.field: m.offset})
        return []

    async def prepare(self, messages: Sequence[RawMessage]) -> Prepared:
        # Something to apply (the messages stand for it): the apply script checks the gap.
        return Prepared(tuple(messages), (), {}, cast(tuple[Embedded, ...], tuple(messages)), 1)

    async def commit(
        self, prepared: Prepared, *, follows: Mapping[str, int] | None = None
    ) -> list[AppliedOutcome]:
        # As the apply script does: nothing applied where a position is behind `follows`.
        if any(self.stored.get(f, -1) < offset for f, offset in (follows or {}).items()):
            self.refused += 1
            raise PositionsBehind(str(follows))
        return await self.project(prepared.messages)

    async def retrying(self, doing: str, attempt: Callable[[], Awaitable[T]]) -> T:
        return await attempt()


class FakeLog:
    def __init__(self, committed: dict[str, int], holes: Collection[int] = ()) -> None:
        self._committed = committed
        self._holes = set(holes)  # offsets without a message (transaction markers)
        self.reads: list[tuple[int, int, int]] = []

    async def committed(self, partitions: Collection[Position]) -> dict[str, int]:
        return {p.field: self._committed[p.field] for p in partitions if p.field in self._committed}

    async def read(
        self, topic: str, partition: int, first: int, last: int
    ) -> AsyncIterator[list[RawMessage]]:
        self.reads.append((partition, first, last))
        chunk = [message(partition, o) for o in range(first, last + 1) if o not in self._holes]
        if chunk:
            yield chunk


def healer(redis: FakeRedis, log: FakeLog) -> Healer:
    return Healer(cast(Projector, redis), cast(ProjectionWriter, redis), log)


def run(coroutine: Awaitable[Any]) -> Any:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


def test_a_batch_after_a_gap_first_gets_the_missing_offsets() -> None:
    redis, log = FakeRedis({f"{TOPIC}/0": 4}), FakeLog({})
    run(healer(redis, log).project([message(0, 9), message(0, 10)]))
    assert log.reads == [(0, 5, 8)]
    assert redis.projected == [(0, o) for o in range(5, 11)]
    assert redis.refused == 1  # the apply found the gap; nothing of the batch went before it


def test_a_batch_prepared_while_the_one_before_is_applied_finds_no_gap() -> None:
    redis, log = FakeRedis({f"{TOPIC}/0": 4}), FakeLog({})
    heal = healer(redis, log)

    async def overlapped() -> None:
        first = await heal.prepare([message(0, 5), message(0, 6)])
        second = await heal.prepare([message(0, 7)])  # before the first is applied
        await heal.commit(first)
        await heal.commit(second)

    run(overlapped())
    assert log.reads == []  # looked for at commit, once the first was applied
    assert redis.refused == 0
    assert redis.projected == [(0, 5), (0, 6), (0, 7)]


def test_a_batch_that_follows_on_reads_nothing_again() -> None:
    redis, log = FakeRedis({f"{TOPIC}/0": 8, f"{TOPIC}/1": 20}), FakeLog({})
    run(healer(redis, log).project([message(0, 9), message(1, 15)]))  # a redelivery, too
    assert log.reads == []


def test_after_assignment_redis_behind_the_committed_offset_is_healed() -> None:
    redis, log = FakeRedis({f"{TOPIC}/1": 2}), FakeLog({f"{TOPIC}/1": 6, f"{TOPIC}/0": 3})
    heal = healer(redis, log)
    heal.assigned([Position(TOPIC, 1, -1)])
    run(heal.check())
    assert log.reads == [(1, 3, 6)]  # partition 0 is not this worker's
    assert redis.stored[f"{TOPIC}/1"] == 6
    run(heal.check())
    assert log.reads == [(1, 3, 6)]  # healed once; nothing more to do


def test_a_redis_that_lost_writes_under_a_running_worker_is_healed_by_the_check() -> None:
    redis, log = FakeRedis({}), FakeLog({})
    heal = healer(redis, log)
    run(heal.project([message(0, 0), message(0, 1), message(0, 2)]))
    redis.stored[f"{TOPIC}/0"] = 0  # Redis restarted on data from before offsets 1 and 2
    run(heal.check())
    assert log.reads == [(0, 1, 2)]
    heal.revoked([Position(TOPIC, 0, -1)])
    redis.stored[f"{TOPIC}/0"] = 0
    run(heal.check())
    assert log.reads == [(0, 1, 2)]  # a revoked partition is its new owner's to check


def test_offsets_without_messages_still_move_the_position() -> None:
    redis, log = FakeRedis({f"{TOPIC}/0": 1}), FakeLog({}, holes={4, 5})
    run(healer(redis, log).project([message(0, 6)]))
    assert redis.projected == [(0, 2), (0, 3), (0, 6)]
    assert redis.stored[f"{TOPIC}/0"] == 6


class StallingLog(FakeLog):
    """A log whose first re-read gives up (a partition whose leader is away), then answers."""

    def __init__(self) -> None:
        super().__init__({})
        self.stalls = 1

    async def read(
        self, topic: str, partition: int, first: int, last: int
    ) -> AsyncIterator[list[RawMessage]]:
        if self.stalls:
            self.stalls -= 1
            raise KafkaUnavailableError(f"could not read {topic}/{partition} again: stalled")
        async for chunk in super().read(topic, partition, first, last):
            yield chunk


def test_a_stalled_re_read_frees_the_worker_and_the_next_check_heals() -> None:
    redis, log = FakeRedis({}), StallingLog()
    heal = healer(redis, log)
    run(heal.project([message(0, 0), message(0, 1), message(0, 2)]))
    redis.stored[f"{TOPIC}/0"] = 0  # Redis lost offsets 1 and 2

    async def stalled_then_healed() -> None:
        assert not await heal.check()  # gave up for now, and let go of the lock:
        await asyncio.wait_for(heal.project([message(1, 0)]), 5)  # other batches go on
        assert await heal.check()

    run(stalled_then_healed())
    assert log.reads == [(0, 1, 2)]
    assert redis.stored[f"{TOPIC}/0"] == 2
    assert (1, 0) in redis.projected


class Kept:
    """Dead letters, kept by offset."""

    def __init__(self) -> None:
        self.offsets: list[int] = []

    async def send(self, message: RawMessage, error: object) -> None:
        self.offsets.append(message.offset)


def test_a_batch_with_nothing_to_apply_after_a_gap_still_waits_for_it() -> None:
    # The real projector over the in-memory projection: a batch of messages that do not
    # decode applies nothing, so no apply script looks at the positions; the projector reads
    # them, and the gap is read again before the batch's position is recorded past it.
    backend = InMemoryProjection(
        Settings.from_env({"MEMSTREAM_BACKEND": "memory", "MEMSTREAM_NAMESPACE": "heal-dl"}),
        lambda tenant: 0,
    )
    field, kept, log = f"{TOPIC}/0", Kept(), FakeLog({})

    async def scenario() -> dict[str, int]:
        async with backend.session() as session:
            writer = session.writer
            await writer.advance({field: 4})
            projector = Projector(
                EmbedderCatalogue(Settings.from_env({}), MiniLMEmbedder()),
                writer,
                session.generations,
                kept,
                default_importance=0.5,
            )
            await Healer(projector, writer, log).project([message(0, 9)])
            return await writer.positions()

    try:
        positions = run(scenario())
    finally:
        backend.drop()
    assert log.reads == [(0, 5, 8)]
    assert sorted(kept.offsets) == [5, 6, 7, 8, 9]  # the batch's own, at its prepare, first
    assert positions[field] == 9
