"""The shard layout and router: a tenant's shard is its partition mod the shard count, each
call goes to that shard only, and a batch spanning partitions is split by shard."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import cast

import pytest

from memstream import MessageRecorded, Settings
from memstream.errors import ConfigurationError, RedisUnavailableError
from memstream.memory.events import MemoryEvent
from memstream.memory.ports import (
    AppliedOutcome,
    Generations,
    Position,
    ProjectionProgress,
    ProjectionWriter,
    ShardLayout,
    TenantStats,
)
from memstream.memory.sharding import ShardedProgress, ShardedTombstones, TenantRouter
from memstream.streams.heal import ShardHealers
from memstream.streams.projector import Projector, RawMessage
from memstream.streams.wire import partition_of

from .test_heal import TOPIC, FakeLog, FakeRedis, message

PARTITIONS = 6


def event(tenant: str, n: int = 0) -> MessageRecorded:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return MessageRecorded(tenant, "t", f"{tenant}-{n}", "text", "user", at, 0.5, "m")


def router(shards: int) -> TenantRouter:
    layout = ShardLayout(tuple(f"redis://r{n}:6379/0" for n in range(shards)))
    return TenantRouter(lambda: layout, lambda tenant: partition_of(tenant, PARTITIONS))


def test_a_tenant_lives_on_its_partition_mod_the_shard_count() -> None:
    route = router(3)
    for n in range(50):
        tenant = f"tenant-{n}"
        assert route.shard_of(tenant) == partition_of(tenant, PARTITIONS) % 3
    assert {route.shard_of(f"tenant-{n}") for n in range(50)} == {0, 1, 2}


def test_one_shard_never_asks_for_the_partition() -> None:
    def unreachable(tenant: str) -> int:
        raise AssertionError("one shard needs no partition count (no broker call)")

    layout = ShardLayout(("redis://only:6379/0",))
    assert TenantRouter(lambda: layout, unreachable).shard_of("anyone") == 0


def test_a_layout_names_each_shards_partitions() -> None:
    layout = ShardLayout(("a", "b", "c"))
    assert [layout.partitions_of(shard, PARTITIONS) for shard in range(3)] == [
        [0, 3],
        [1, 4],
        [2, 5],
    ]
    assert [layout.url_of(p) for p in range(4)] == ["a", "b", "c", "a"]
    with pytest.raises(ValueError, match="at least one"):
        ShardLayout(())


def test_the_setting_lists_the_shards_and_one_url_is_todays_redis() -> None:
    assert Settings.from_env({"MEMSTREAM_REDIS_PORT": "16379"}).shard_urls == (
        "redis://127.0.0.1:16379/0",
    )
    sharded = Settings.from_env({"MEMSTREAM_REDIS_SHARDS": "redis://a:1/0, redis://b:2/0"})
    assert sharded.shard_urls == ("redis://a:1/0", "redis://b:2/0")
    with pytest.raises(ConfigurationError, match="names a Redis twice"):
        Settings.from_env({"MEMSTREAM_REDIS_SHARDS": "redis://a:1/0,redis://a:1/0"})


class FakeProgress:
    """One shard's progress: which events it applied, and its positions."""

    def __init__(self, applied: set[str], positions: dict[str, int]) -> None:
        self.applied = applied
        self.stored = positions
        self.asked: list[str] = []

    def live_generation(self) -> int:
        return 1

    def unapplied(self, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
        self.asked += [e.tenant for e in events]
        return [e for e in events if e.id not in self.applied]

    def wait_applied(
        self,
        events: Sequence[MemoryEvent],
        timeout_s: float,
        tick: Callable[[int, int], None] | None = None,
    ) -> list[MemoryEvent]:
        return self.unapplied(events)

    def memory_count(self, tenant: str) -> int:
        self.asked.append(tenant)
        return 1

    def positions(self) -> dict[str, int]:
        return dict(self.stored)

    def tenant_stats(self, tenant: str | None = None) -> list[TenantStats]:
        at = datetime(2026, 1, 1, tzinfo=UTC)
        return [TenantStats(t, 1, at, at) for t in sorted(set(self.asked))]


class FakeShards:
    """Parts by shard, over the layout `layouts` gives at each reading (a test may switch it
    between any two readings, as a reshard does)."""

    def __init__(
        self,
        route: TenantRouter,
        parts: list[ProjectionProgress],
        layouts: Callable[[], int] | None = None,
    ) -> None:
        self._route = route
        self._parts = parts
        self._count = layouts or (lambda: len(parts))

    def _layout(self) -> ShardLayout:
        return ShardLayout(tuple(str(n) for n in range(self._count())))

    def of(self, tenant: str) -> ProjectionProgress:
        return self._parts[self._route.shard_in(self._layout(), tenant)]

    def home(self) -> ProjectionProgress:
        return self._parts[0]

    def owned(self) -> list[tuple[ProjectionProgress, Callable[[int], bool]]]:
        layout = self._layout()
        return [
            (self._parts[shard], lambda p, shard=shard: layout.of_partition(p) == shard)  # type: ignore[misc]
            for shard in range(layout.count)
        ]


def tenants_on(route: TenantRouter, shard: int, count: int) -> list[str]:
    return [t for t in (f"tenant-{n}" for n in range(200)) if route.shard_of(t) == shard][:count]


def test_progress_asks_each_tenants_shard_only_and_keeps_the_callers_order() -> None:
    route = router(2)
    a, b = tenants_on(route, 0, 1)[0], tenants_on(route, 1, 1)[0]
    events = [event(a, 0), event(b, 0), event(a, 1), event(b, 1)]
    # Shard 1 still holds the position of partition 2, which a reshard moved to shard 0.
    shards = [FakeProgress({events[0].id}, {"m/0": 5}), FakeProgress(set(), {"m/1": 7, "m/2": 3})]
    progress = ShardedProgress(FakeShards(route, cast(list[ProjectionProgress], shards)))
    assert progress.unapplied(events) == [events[1], events[2], events[3]]
    assert set(shards[0].asked) == {a} and set(shards[1].asked) == {b}
    assert progress.wait_applied(events, 0.0) == [events[2], events[1], events[3]]
    assert progress.positions() == {"m/0": 5, "m/1": 7}
    progress.memory_count(b)
    assert shards[0].asked.count(b) == 0
    assert [s.tenant for s in progress.tenant_stats()] == sorted([a, b])


class FakeTombstones:
    """One shard's tombstones; `down` makes its reads fail as an unreachable Redis does."""

    def __init__(self, tombstones: dict[str, set[str]], *, down: bool = False) -> None:
        self.tombstones = tombstones
        self.down = down
        self.reads: list[set[str]] = []
        self.closed = False

    async def forgotten(
        self, asked: Mapping[str, Collection[str]]
    ) -> dict[str, set[str] | Exception]:
        self.reads.append(set(asked))
        if self.down:
            raise RedisUnavailableError("Redis at r1 did not answer")
        return {t: set(ids) & self.tombstones.get(t, set()) for t, ids in asked.items()}

    async def aclose(self) -> None:
        self.closed = True


def test_tombstones_are_read_once_per_shard_and_a_dead_shard_fails_only_its_tenants() -> None:
    route = router(2)
    (a, a2), (b,) = tenants_on(route, 0, 2), tenants_on(route, 1, 1)
    shards = [FakeTombstones({a: {"x"}, a2: {"z"}}), FakeTombstones({b: {"y"}})]
    reader = ShardedTombstones(FakeShards(route, cast(list[ProjectionProgress], shards)))  # type: ignore[arg-type]
    found = asyncio.run(reader.forgotten({a: ["x", "w"], a2: ["w"], b: ["y"]}))
    assert found == {a: {"x"}, a2: set(), b: {"y"}}
    assert shards[0].reads == [{a, a2}] and shards[1].reads == [{b}]

    shards[1].down = True
    found = asyncio.run(reader.forgotten({a: ["x"], b: ["y"]}))
    assert found[a] == {"x"}
    assert isinstance(found[b], RedisUnavailableError)
    asyncio.run(reader.aclose())
    assert shards[0].closed and shards[1].closed


def test_a_reshard_to_fewer_shards_between_two_readings_routes_to_shards_that_exist() -> None:
    """The layout shrinks from 3 shards to 1 while a multi-tenant call is under way: each
    tenant is asked of a shard of one layout or the other, never of a shard index the
    newer layout does not have."""
    route = router(3)
    tenants = [tenants_on(route, shard, 2)[n] for shard in range(3) for n in range(2)]
    events = [event(t) for t in tenants]
    readings = iter([3, 3, 3] + [1] * 1000)  # the switch lands mid-call
    parts = [FakeProgress(set(), {f"m/{p}": p for p in range(PARTITIONS)}) for _ in range(3)]
    progress = ShardedProgress(
        FakeShards(route, cast(list[ProjectionProgress], parts), lambda: next(readings))
    )
    assert progress.unapplied(events) == events
    assert progress.wait_applied(events, 0.0) == events
    assert progress.positions() == {f"m/{p}": p for p in range(PARTITIONS)}  # shard 0 owns all
    assert len(progress.tenant_stats()) == len(tenants)


class FakeShard(FakeRedis):
    """One shard's positions and what was projected to it; its own projector, failing fast
    (as the worker's) while the shard is `dead`."""

    dead = False

    def _answer(self) -> None:
        if self.dead:
            raise RedisUnavailableError("the shard is down")

    async def start(self) -> None:
        self._answer()
        await super().start()

    async def positions(self) -> dict[str, int]:
        self._answer()
        return await super().positions()

    async def project(self, messages: Sequence[RawMessage]) -> list[AppliedOutcome]:
        self._answer()
        return await super().project(messages)


class FakeWriters:
    """The worker's view of the shards: a layout that a test can replace (a reshard)."""

    def __init__(self, layout: ShardLayout) -> None:
        self.layout = layout
        self.shards: dict[str, FakeShard] = {}

    def current_layout(self) -> ShardLayout:
        return self.layout

    def live_writer(self, url: str) -> tuple[ProjectionWriter, Generations]:
        shard = self.shards.setdefault(url, FakeShard({}))
        return cast(ProjectionWriter, shard), cast(Generations, None)


def healers(writers: FakeWriters, log: FakeLog) -> ShardHealers:
    return ShardHealers(writers, lambda writer, _: cast(Projector, writer), log)


def batch(partitions: range, offsets: range) -> list[RawMessage]:
    return [message(p, o) for o in offsets for p in partitions]


def test_a_batch_spanning_partitions_goes_to_each_partitions_shard_in_order() -> None:
    writers, log = FakeWriters(ShardLayout(("a", "b", "c"))), FakeLog({})
    heal = healers(writers, log)
    heal.assigned([Position(TOPIC, p, -1) for p in range(PARTITIONS)])
    asyncio.run(heal.start())
    asyncio.run(heal.project(batch(range(PARTITIONS), range(3))))
    for shard, url in enumerate("abc"):
        assert writers.shards[url].projected == [
            (p, o) for o in range(3) for p in range(PARTITIONS) if p % 3 == shard
        ]
    assert log.reads == []
    assert heal.last_consumed(f"{TOPIC}/5") is None  # its committed offset not read yet
    asyncio.run(heal.check())
    assert heal.last_consumed(f"{TOPIC}/5") == 2


def test_a_newer_layout_is_followed_and_the_new_shard_healed_from_the_log() -> None:
    writers, log = FakeWriters(ShardLayout(("a", "b"))), FakeLog({})
    heal = healers(writers, log)
    asyncio.run(heal.start())
    heal.assigned([Position(TOPIC, p, -1) for p in range(4)])
    asyncio.run(heal.project(batch(range(4), range(3))))
    writers.layout = ShardLayout(("a", "b", "c", "d"), version=2)  # partitions 2, 3 move
    asyncio.run(heal.project(batch(range(4), range(3, 5))))
    # The new shards first read what their partitions' old shards took in (0..2), then the
    # batch; the shards that kept their partitions read nothing again.
    assert sorted(log.reads) == [(2, 0, 2), (3, 0, 2)]
    assert writers.shards["c"].projected == [(2, o) for o in range(5)]
    assert writers.shards["d"].projected == [(3, o) for o in range(5)]
    assert sorted(writers.shards["a"].projected) == sorted(
        [(0, o) for o in range(5)] + [(2, o) for o in range(3)]
    )


def test_a_moved_partition_with_nothing_new_gets_all_its_old_shard_took_in() -> None:
    # Kafka has committed nothing yet (its commits are seconds behind): what the worker
    # consumed is what the new shard must get, or a reshard waits on it for good.
    writers, log = FakeWriters(ShardLayout(("a", "b"))), FakeLog({})
    heal = healers(writers, log)
    asyncio.run(heal.start())
    heal.assigned([Position(TOPIC, p, -1) for p in range(4)])
    asyncio.run(heal.check())  # their committed offsets read: none
    asyncio.run(heal.project(batch(range(4), range(3))))
    writers.layout = ShardLayout(("a", "b", "c", "d"), version=2)  # partitions 2, 3 move
    asyncio.run(heal.check())
    assert sorted(log.reads) == [(2, 0, 2), (3, 0, 2)]
    assert writers.shards["c"].projected == [(2, o) for o in range(3)]
    assert writers.shards["d"].projected == [(3, o) for o in range(3)]


def test_a_batch_split_before_the_switch_and_applied_after_it_reaches_the_new_shard() -> None:
    writers, log = FakeWriters(ShardLayout(("a", "b"))), FakeLog({})
    heal = healers(writers, log)
    asyncio.run(heal.start())
    heal.assigned([Position(TOPIC, p, -1) for p in range(4)])
    asyncio.run(heal.check())

    async def overlapped() -> None:
        before = await heal.prepare(batch(range(4), range(2)))  # split by the old layout
        writers.layout = ShardLayout(("a", "b", "c", "d"), version=2)
        after = await heal.prepare(batch(range(2), range(2, 3)))  # follows the new one
        await heal.commit(before)  # partitions 2 and 3 to their old shards, a and b
        await heal.commit(after)  # nothing new of 2 and 3: the check heals them
        await heal.check()

    asyncio.run(overlapped())
    assert writers.shards["c"].projected == [(2, o) for o in range(2)]
    assert writers.shards["d"].projected == [(3, o) for o in range(2)]


def test_a_dead_shard_holds_only_its_own_partitions_and_heals_when_back() -> None:
    writers, log = FakeWriters(ShardLayout(("a", "b", "c"))), FakeLog({})
    heal = healers(writers, log)
    asyncio.run(heal.start())
    heal.assigned([Position(TOPIC, p, -1) for p in range(PARTITIONS)])
    asyncio.run(heal.check())  # committed offsets read: nothing consumed yet
    asyncio.run(heal.project(batch(range(PARTITIONS), range(2))))
    writers.shards["a"].dead = True  # partitions 0 and 3

    async def while_down() -> None:
        await heal.project(batch(range(PARTITIONS), range(2, 4)))
        await heal.project(batch(range(PARTITIONS), range(4, 6)))
        await heal.check()  # still down: nothing read, nothing lost

    asyncio.run(while_down())
    assert heal.down == {"a"}
    for url in "bc":  # the live shards took every batch as it came
        assert sorted(writers.shards[url].projected) == sorted(
            (p, o) for p in range(PARTITIONS) for o in range(6) if "abc"[p % 3] == url
        )
    assert sorted(writers.shards["a"].projected) == [(p, o) for p in (0, 3) for o in range(2)]
    assert heal.last_consumed(f"{TOPIC}/0") == 5  # consumed, left to healing
    assert log.reads == []

    writers.shards["a"].dead = False  # back, from its files
    asyncio.run(heal.check())
    assert heal.down == frozenset()
    assert sorted(log.reads) == [(0, 2, 5), (3, 2, 5)]  # exactly what it missed, once
    assert sorted(writers.shards["a"].projected) == [(p, o) for p in (0, 3) for o in range(6)]
    asyncio.run(heal.project(batch(range(PARTITIONS), range(6, 7))))
    assert writers.shards["a"].projected[-2:] == [(0, 6), (3, 6)]
    assert sorted(log.reads) == [(0, 2, 5), (3, 2, 5)]


def test_a_shard_down_when_the_worker_starts_is_prepared_once_it_answers() -> None:
    writers, log = FakeWriters(ShardLayout(("a", "b"))), FakeLog({})
    writers.live_writer("b")[0]
    writers.shards["b"].dead = True
    heal = healers(writers, log)
    asyncio.run(heal.start())  # does not wait for shard b
    assert heal.down == {"b"}
    asyncio.run(heal.project(batch(range(2), range(3))))
    assert writers.shards["a"].projected == [(0, o) for o in range(3)]
    writers.shards["b"].dead = False
    asyncio.run(heal.check())
    assert heal.down == frozenset()
    assert writers.shards["b"].projected == [(1, o) for o in range(3)]
