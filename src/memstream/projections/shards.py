"""The shard layout and the router: which Redis holds which tenant, and the tenant-scoped ports
that send each call to it.

A tenant lives on one shard, `partition(tenant) mod shards`, with the partition computed as
every producer computes it (murmur2 of the tenant key over the memory topic's partition count;
the composition root hands that function in, since the projection knows no Kafka). A worker
writes each partition's events to shard `partition mod shards`, so a tenant's memories,
markers, tombstones, order sets and its partition's position all sit on the same shard, and
every tenant-scoped read goes to that shard alone (docs/scaling.md).

Namespace-wide records (API keys, heartbeats) live on shard 0: they are few, read rarely,
and one home keeps them consistent without a cross-shard write.

With one shard nothing here is used: `RedisProjection` hands out the shard's own parts, so a
one-Redis deployment runs exactly the code (and the keys) it always did.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memstream.errors import ConfigurationError
from memstream.memory.events import MemoryEvent
from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.ports import MemoryLookup, ProjectionProgress, Recaller, TenantStats
from memstream.memory.store import MemoryFilter
from memstream.projections.recall import SearchFilter
from memstream.projections.search import Search, SearchMode, SearchPage

__all__ = [
    "ShardLayout",
    "ShardedLookup",
    "ShardedProgress",
    "ShardedRecaller",
    "ShardedSearch",
    "TenantRouter",
]


@dataclass(frozen=True, slots=True)
class ShardLayout:
    """The shards' Redis URLs in shard order, and the layout's version (a layout that moves
    partitions between shards is a new version)."""

    urls: tuple[str, ...]
    version: int = 1

    def __post_init__(self) -> None:
        if not self.urls:
            raise ConfigurationError("a shard layout needs at least one Redis URL")

    @property
    def count(self) -> int:
        return len(self.urls)

    def of_partition(self, partition: int) -> int:
        """The shard that holds `partition`'s tenants and position."""
        return partition % len(self.urls)

    def partitions_of(self, shard: int, partitions: int) -> list[int]:
        """The partitions (of `partitions`) shard `shard` holds."""
        return [p for p in range(partitions) if self.of_partition(p) == shard]


class TenantRouter:
    """A tenant's shard: its partition (`partition_of`, the producers' function), mod the
    shard count. With one shard it is always 0 and the partition is never asked for."""

    def __init__(self, layout: ShardLayout, partition_of: Callable[[str], int]) -> None:
        self.layout = layout
        self._partition_of = partition_of

    def shard_of(self, tenant: str) -> int:
        if self.layout.count == 1:
            return 0
        return self.layout.of_partition(self._partition_of(tenant))


class ShardedLookup:
    """`MemoryLookup` over the shards: each tenant's reads go to its shard."""

    def __init__(self, router: TenantRouter, shards: Sequence[MemoryLookup]) -> None:
        self._router = router
        self._shards = shards

    def _of(self, tenant: str) -> MemoryLookup:
        return self._shards[self._router.shard_of(tenant)]

    def memories(self, tenant: str, where: MemoryFilter | None = None) -> list[Memory]:
        return self._of(tenant).memories(tenant, where)

    def memories_by_id(self, tenant: str, ids: Sequence[str]) -> list[Memory | None]:
        return self._of(tenant).memories_by_id(tenant, ids)

    def forgotten(self, tenant: str, memory_ids: Sequence[str]) -> set[str]:
        return self._of(tenant).forgotten(tenant, memory_ids)


class ShardedRecaller:
    """`Recaller` over the shards: a tenant's recall runs on its shard only."""

    def __init__(self, router: TenantRouter, shards: Sequence[Recaller]) -> None:
        self._router = router
        self._shards = shards

    def recall(self, tenant: str, text: str, k: int = 10) -> list[RecalledMemory]:
        return self._shards[self._router.shard_of(tenant)].recall(tenant, text, k)


class ShardedSearch:
    """The HTTP API's filtered search over the shards: `where.tenant`'s shard answers."""

    def __init__(self, router: TenantRouter, shards: Sequence[Search]) -> None:
        self._router = router
        self._shards = shards

    def search(
        self,
        where: SearchFilter,
        text: str,
        *,
        mode: SearchMode = SearchMode.HYBRID,
        limit: int = 10,
        offset: int = 0,
        max_distance: float | None = None,
        keep: Callable[[Memory], bool] | None = None,
    ) -> SearchPage:
        return self._shards[self._router.shard_of(where.tenant)].search(
            where,
            text,
            mode=mode,
            limit=limit,
            offset=offset,
            max_distance=max_distance,
            keep=keep,
        )


class ShardedProgress:
    """`ProjectionProgress` over the shards: a tenant's events and counts are asked of its
    shard; positions and statistics of all tenants are every shard's together."""

    def __init__(self, router: TenantRouter, shards: Sequence[ProjectionProgress]) -> None:
        self._router = router
        self._shards = shards

    def live_generation(self) -> int:
        """Shard 0's live generation (each shard swaps its own: `memstream stats` shows
        them all)."""
        return self._shards[0].live_generation()

    def unapplied(self, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
        by_shard: dict[int, list[MemoryEvent]] = {}
        for event in events:
            by_shard.setdefault(self._router.shard_of(event.tenant), []).append(event)
        missing = {
            id(event)
            for shard, own in by_shard.items()
            for event in self._shards[shard].unapplied(own)
        }
        return [event for event in events if id(event) in missing]

    def wait_applied(
        self,
        events: Sequence[MemoryEvent],
        timeout_s: float,
        tick: Callable[[int, int], None] | None = None,
    ) -> list[MemoryEvent]:
        by_shard: dict[int, list[MemoryEvent]] = {}
        for event in events:
            by_shard.setdefault(self._router.shard_of(event.tenant), []).append(event)
        tenants = len({event.tenant for event in events})
        deadline = time.monotonic() + timeout_s
        done = 0
        late: list[MemoryEvent] = []
        # One shard after the other within the one deadline: each shard's wait polls only its
        # own tenants, and a shard that is done is not asked again.
        for shard, own in by_shard.items():

            def counted(applied: int, _: int, before: int = done) -> None:
                if tick is not None:
                    tick(before + applied, tenants)

            left = max(deadline - time.monotonic(), 0.0)
            late += self._shards[shard].wait_applied(own, left, counted)
            done += len({event.tenant for event in own})
        return late

    def memory_count(self, tenant: str) -> int:
        return self._shards[self._router.shard_of(tenant)].memory_count(tenant)

    def positions(self) -> dict[str, int]:
        """Every shard's positions: each holds only its own partitions'."""
        merged: dict[str, int] = {}
        for shard in self._shards:
            merged |= shard.positions()
        return merged

    def tenant_stats(self, tenant: str | None = None) -> list[TenantStats]:
        if tenant is not None:
            return self._shards[self._router.shard_of(tenant)].tenant_stats(tenant)
        every = itertools.chain.from_iterable(shard.tenant_stats() for shard in self._shards)
        return sorted(every, key=lambda s: s.tenant)
