"""The shard layout and router: a tenant's shard is its partition mod the shard count, each
call goes to that shard only, and a batch spanning partitions is split by shard."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import cast

import pytest

from memstream import MessageRecorded, Settings
from memstream.errors import ConfigurationError
from memstream.memory.events import MemoryEvent
from memstream.memory.ports import AppliedOutcome, Position, ProjectionProgress, TenantStats
from memstream.projections.shards import ShardedProgress, ShardLayout, TenantRouter
from memstream.streams.heal import Healer, ShardHealers
from memstream.streams.projector import RawMessage
from memstream.streams.wire import partition_of

PARTITIONS = 6


def event(tenant: str, n: int = 0) -> MessageRecorded:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return MessageRecorded(tenant, "t", f"{tenant}-{n}", "text", "user", at, 0.5, "m")


def router(shards: int) -> TenantRouter:
    layout = ShardLayout(tuple(f"redis://r{n}:6379/0" for n in range(shards)))
    return TenantRouter(layout, lambda tenant: partition_of(tenant, PARTITIONS))


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
    assert TenantRouter(layout, unreachable).shard_of("anyone") == 0


def test_a_layout_names_each_shards_partitions() -> None:
    layout = ShardLayout(("a", "b", "c"))
    assert [layout.partitions_of(shard, PARTITIONS) for shard in range(3)] == [
        [0, 3],
        [1, 4],
        [2, 5],
    ]
    with pytest.raises(ConfigurationError):
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


def tenants_on(route: TenantRouter, shard: int, count: int) -> list[str]:
    return [t for t in (f"tenant-{n}" for n in range(200)) if route.shard_of(t) == shard][:count]


def test_progress_asks_each_tenants_shard_only_and_keeps_the_callers_order() -> None:
    route = router(2)
    a, b = tenants_on(route, 0, 1)[0], tenants_on(route, 1, 1)[0]
    events = [event(a, 0), event(b, 0), event(a, 1), event(b, 1)]
    shards = [FakeProgress({events[0].id}, {"m/0": 5}), FakeProgress(set(), {"m/1": 7})]
    progress = ShardedProgress(route, cast(list[ProjectionProgress], shards))
    assert progress.unapplied(events) == [events[1], events[2], events[3]]
    assert set(shards[0].asked) == {a} and set(shards[1].asked) == {b}
    assert progress.wait_applied(events, 0.0) == [events[2], events[1], events[3]]
    assert progress.positions() == {"m/0": 5, "m/1": 7}
    progress.memory_count(b)
    assert shards[0].asked.count(b) == 0
    assert [s.tenant for s in progress.tenant_stats()] == sorted([a, b])


class Recorder:
    """Stands in for one shard's healer: records what it was given."""

    def __init__(self) -> None:
        self.projected: list[tuple[int, int]] = []
        self.assigned_to: list[int] = []
        self.checks = 0

    async def project(self, messages: Sequence[RawMessage]) -> list[AppliedOutcome]:
        self.projected += [(m.partition, m.offset) for m in messages]
        return []

    def assigned(self, partitions: Sequence[Position]) -> None:
        self.assigned_to += [p.partition for p in partitions]

    def revoked(self, partitions: Sequence[Position]) -> None:
        for p in partitions:
            self.assigned_to.remove(p.partition)

    def last_consumed(self, field: str) -> int | None:
        return int(field.rpartition("/")[2])

    async def check(self) -> None:
        self.checks += 1


def test_a_batch_spanning_partitions_goes_to_each_partitions_shard_in_order() -> None:
    recorders = [Recorder(), Recorder(), Recorder()]
    layout = ShardLayout(("a", "b", "c"))
    healers = ShardHealers(cast(list[Healer], recorders), layout.of_partition)
    batch = [RawMessage("m", p, o, b"k", b"v") for o in range(3) for p in range(PARTITIONS)]
    asyncio.run(healers.project(batch))
    for shard, recorder in enumerate(recorders):
        assert recorder.projected == [
            (p, o) for o in range(3) for p in range(PARTITIONS) if p % 3 == shard
        ]
    healers.assigned([Position("m", p, -1) for p in range(PARTITIONS)])
    assert [r.assigned_to for r in recorders] == [[0, 3], [1, 4], [2, 5]]
    healers.revoked([Position("m", 4, -1)])
    assert recorders[1].assigned_to == [1]
    assert healers.last_consumed("m/5") == 5
    asyncio.run(healers.check())
    assert [r.checks for r in recorders] == [1, 1, 1]
