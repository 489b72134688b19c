"""The shard layout's router: which shard holds which tenant, and the tenant-scoped ports that
send each call to it. Backend-neutral: a backend hands in its shards' ports (Redis's are
projections/shard.py's).

A tenant lives on one shard, `partition(tenant) mod shards`, with the partition computed as
every producer computes it (murmur2 of the tenant key over the memory topic's partition count;
the composition root hands that function in, since the projection knows no Kafka). A worker
writes each partition's events to shard `partition mod shards`, so a tenant's memories,
markers, tombstones, order sets and its partition's position all sit on the same shard, and
every tenant-scoped read goes to that shard alone (docs/scaling.md).

Namespace-wide records (API keys, heartbeats) live on shard 0: they are few, read rarely,
and one home keeps them consistent without a cross-shard write.

With one shard every call goes to shard 0 without asking for a partition: a one-Redis
deployment keeps its keys and its code path (one routing call in front of each part).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.ports import (
    ItemIndex,
    Marked,
    MemoryLookup,
    ProjectionProgress,
    Recaller,
    ShardLayout,
    StoredSession,
    TenantStats,
    TombstoneReader,
    WorkingMemoryStore,
)
from memstream.memory.search import MemorySearch, SearchFilter, SearchMode, SearchPage
from memstream.memory.store import MemoryFilter
from memstream.memory.tenancy import TenantId

__all__ = [
    "ShardedItems",
    "ShardedLookup",
    "ShardedProgress",
    "ShardedRecaller",
    "ShardedSearch",
    "ShardedTombstones",
    "ShardedWorkingMemory",
    "Shards",
    "TenantRouter",
]

T_co = TypeVar("T_co", covariant=True)


class TenantRouter:
    """A tenant's shard: its partition (`partition_of`, the producers' function), mod the
    shard count of the layout now (`layout`). With one shard it is always 0 and the partition
    is never asked for."""

    def __init__(
        self, layout: Callable[[], ShardLayout], partition_of: Callable[[str], int]
    ) -> None:
        self._layout = layout
        self._partition_of = partition_of

    def shard_of(self, tenant: str) -> int:
        return self.shard_in(self._layout(), tenant)

    def shard_in(self, layout: ShardLayout, tenant: str) -> int:
        """The tenant's shard in `layout`."""
        if layout.count == 1:
            return 0
        return layout.of_partition(self._partition_of(tenant))


class Shards(Protocol[T_co]):
    """One part (a reader, a recaller...) per shard of the layout now. Each call reads the
    layout once: a reshard switching it between two calls (even to fewer shards) can route a
    caller to a shard that was just left, never to one that is not there."""

    def of(self, tenant: str) -> T_co:
        """The tenant's shard's part (shard and part from one reading of the layout)."""
        ...

    def home(self) -> T_co:
        """Shard 0's part (shard 0 stays first through every reshard)."""
        ...

    def owned(self) -> Sequence[tuple[T_co, Callable[[int], bool]]]:
        """Each shard's part, with whether a partition is that shard's (one layout)."""
        ...


class ShardedLookup:
    """`MemoryLookup` over the shards: each tenant's reads go to its shard."""

    def __init__(self, shards: Shards[MemoryLookup]) -> None:
        self._shards = shards

    def memories(self, tenant: TenantId, where: MemoryFilter | None = None) -> list[Memory]:
        return self._shards.of(tenant).memories(tenant, where)

    def memories_by_id(self, tenant: TenantId, ids: Sequence[str]) -> list[Memory | None]:
        return self._shards.of(tenant).memories_by_id(tenant, ids)

    def documents(self, tenant: TenantId, collection: str) -> dict[str, str]:
        return self._shards.of(tenant).documents(tenant, collection)


class ShardedTombstones:
    """`TombstoneReader` over the shards: the tenants asked are read on their shards, one
    round trip per shard, the shards at once; an unreachable shard fails only its tenants."""

    def __init__(self, shards: Shards[TombstoneReader]) -> None:
        self._shards = shards
        self._used: dict[int, TombstoneReader] = {}  # the parts asked, closed with this one

    async def forgotten(
        self, asked: Mapping[str, Collection[str]]
    ) -> dict[str, set[str] | Exception]:
        by_shard: dict[int, tuple[TombstoneReader, dict[str, Collection[str]]]] = {}
        for tenant, ids in asked.items():
            part = self._shards.of(tenant)
            by_shard.setdefault(id(part), (part, {}))[1][tenant] = ids
            self._used[id(part)] = part
        answers = await asyncio.gather(
            *(part.forgotten(tenants) for part, tenants in by_shard.values()),
            return_exceptions=True,
        )
        found: dict[str, set[str] | Exception] = {}
        for (_, tenants), answer in zip(by_shard.values(), answers, strict=True):
            if isinstance(answer, BaseException) and not isinstance(answer, Exception):
                raise answer
            found.update(answer if isinstance(answer, dict) else dict.fromkeys(tenants, answer))
        return found

    async def aclose(self) -> None:
        for part in self._used.values():
            await part.aclose()


class ShardedItems:
    """`ItemIndex` over the shards: a tenant's items are on its shard."""

    def __init__(self, shards: Shards[ItemIndex]) -> None:
        self._shards = shards

    def similarities(
        self, tenant: TenantId, memory_ids: Sequence[str], text: str
    ) -> dict[str, float]:
        return self._shards.of(tenant).similarities(tenant, memory_ids, text)

    def refresh(self, tenant: TenantId, leases: Sequence[tuple[str, str, datetime]]) -> None:
        self._shards.of(tenant).refresh(tenant, leases)


class ShardedWorkingMemory:
    """`WorkingMemoryStore` over the shards: a tenant's sessions are on its shard."""

    def __init__(self, shards: Shards[WorkingMemoryStore]) -> None:
        self._shards = shards
        self._used: dict[int, WorkingMemoryStore] = {}  # the parts asked, closed with this one

    def _of(self, tenant: TenantId) -> WorkingMemoryStore:
        part = self._shards.of(tenant)
        self._used[id(part)] = part
        return part

    async def get(self, tenant: TenantId, session_id: str) -> StoredSession | None:
        return await self._of(tenant).get(tenant, session_id)

    async def put(
        self,
        tenant: TenantId,
        session_id: str,
        document: str,
        *,
        expected_version: int,
        ttl_s: int | None,
        owner: str | None,
    ) -> int:
        return await self._of(tenant).put(
            tenant,
            session_id,
            document,
            expected_version=expected_version,
            ttl_s=ttl_s,
            owner=owner,
        )

    async def delete(self, tenant: TenantId, session_id: str) -> bool:
        return await self._of(tenant).delete(tenant, session_id)

    async def sessions(
        self, tenant: TenantId, *, owner: str | None, offset: int, limit: int
    ) -> tuple[int, list[str]]:
        return await self._of(tenant).sessions(tenant, owner=owner, offset=offset, limit=limit)

    async def aclose(self) -> None:
        for part in self._used.values():
            await part.aclose()


class ShardedRecaller:
    """`Recaller` over the shards: a tenant's recall runs on its shard only."""

    def __init__(self, shards: Shards[Recaller]) -> None:
        self._shards = shards

    def recall(self, tenant: TenantId, text: str, k: int = 10) -> list[RecalledMemory]:
        return self._shards.of(tenant).recall(tenant, text, k)


class ShardedSearch:
    """The HTTP API's filtered search over the shards: `where.tenant`'s shard answers."""

    def __init__(self, shards: Shards[MemorySearch]) -> None:
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
        vector_weight: float | None = None,
        scorer: str | None = None,
    ) -> SearchPage:
        return self._shards.of(where.tenant).search(
            where,
            text,
            mode=mode,
            limit=limit,
            offset=offset,
            max_distance=max_distance,
            keep=keep,
            vector_weight=vector_weight,
            scorer=scorer,
        )


class ShardedProgress:
    """`ProjectionProgress` over the shards: a tenant's events and counts are asked of its
    shard; positions and statistics of all tenants are every shard's together."""

    def __init__(self, shards: Shards[ProjectionProgress]) -> None:
        self._shards = shards

    def _by_shard(self, events: Sequence[Marked]) -> list[tuple[ProjectionProgress, list[Marked]]]:
        """The events grouped by their tenant's shard, as (that shard's part, its events)."""
        by_shard: dict[int, tuple[ProjectionProgress, list[Marked]]] = {}
        for event in events:
            part = self._shards.of(event.tenant)
            by_shard.setdefault(id(part), (part, []))[1].append(event)
        return list(by_shard.values())

    def live_generation(self) -> int:
        """Shard 0's live generation (each shard swaps its own: `memstream stats` shows
        them all)."""
        return self._shards.home().live_generation()

    def unapplied(self, events: Sequence[Marked]) -> list[Marked]:
        missing = {
            id(event) for part, own in self._by_shard(events) for event in part.unapplied(own)
        }
        return [event for event in events if id(event) in missing]

    def wait_applied(
        self,
        events: Sequence[Marked],
        timeout_s: float,
        tick: Callable[[int, int], None] | None = None,
    ) -> list[Marked]:
        tenants = len({event.tenant for event in events})
        deadline = time.monotonic() + timeout_s
        done = 0
        late: list[Marked] = []
        # One shard after the other within the one deadline: each shard's wait polls only its
        # own tenants, and a shard that is done is not asked again.
        for part, own in self._by_shard(events):

            def counted(applied: int, _: int, before: int = done) -> None:
                if tick is not None:
                    tick(before + applied, tenants)

            left = max(deadline - time.monotonic(), 0.0)
            late += part.wait_applied(own, left, counted)
            done += len({event.tenant for event in own})
        return late

    def memory_count(self, tenant: TenantId) -> int:
        return self._shards.of(tenant).memory_count(tenant)

    def positions(self) -> dict[str, int]:
        """Every shard's positions of its own partitions (a shard may still hold positions of
        partitions a reshard moved away: they are not its to report)."""
        merged: dict[str, int] = {}
        for part, owns in self._shards.owned():
            for field, offset in part.positions().items():
                if owns(int(field.rpartition("/")[2])):
                    merged[field] = offset
        return merged

    def tenant_stats(self, tenant: TenantId | None = None) -> list[TenantStats]:
        if tenant is not None:
            return self._shards.of(tenant).tenant_stats(tenant)
        every = itertools.chain.from_iterable(
            part.tenant_stats() for part, _ in self._shards.owned()
        )
        return sorted(every, key=lambda s: s.tenant)
