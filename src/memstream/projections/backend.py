"""The Redis projection as one object: every part of the projection a process uses, built from
the Settings, and the only door into Redis for the rest of memstream.

`RedisProjection(settings, partition_of)` holds one `RedisShard` per Redis of the layout
(MEMSTREAM_REDIS_SHARDS, else the one MEMSTREAM_REDIS_URL) and hands out the ports of
`memory.ports`: tenant-scoped reads (reader, recaller, search, progress) go to the tenant's
shard (`projections.shards`); the worker, `replay` and `verify` take a shard's writer,
generations and comparer one shard at a time (`shards`, `session(shard)`), since positions,
generations and swaps are each shard's own. API keys and heartbeats live on shard 0. With one
shard it hands out that shard's parts themselves: the one-Redis code and keys of before.
The composition root (`memstream.deployment`) builds it; nothing above `projections/` sees a
Redis client, a key or a URL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import cached_property

import redis
import redis.asyncio

from memstream.config import Settings
from memstream.memory.embeddings import Embedders
from memstream.memory.ports import (
    ApiKeyStore,
    Generations,
    MemoryLookup,
    ProcessRegistry,
    ProjectionProgress,
    ProjectionSession,
    ProjectionWriter,
    Recaller,
    ShardReport,
)
from memstream.memory.ranking.fusion import RecallTuning
from memstream.projections.acl import REDIS_ROLES, redis_acl_command
from memstream.projections.connection import RedisConnection
from memstream.projections.schema import Keyspace
from memstream.projections.search import Search
from memstream.projections.shard import RedisShard
from memstream.projections.shards import (
    ShardedLookup,
    ShardedProgress,
    ShardedRecaller,
    ShardedSearch,
    ShardLayout,
    TenantRouter,
)

__all__ = ["RedisProjection"]


class RedisProjection:
    """One namespace's projection over its Redis shards. Nothing connects until a part is
    used. `partition_of` is the producers' tenant -> partition function (only asked when
    there is more than one shard)."""

    def __init__(self, settings: Settings, partition_of: Callable[[str], int]) -> None:
        self.settings = settings
        self.keys = Keyspace(settings.namespace)
        self.layout = ShardLayout(settings.shard_urls)
        self.router = TenantRouter(self.layout, partition_of)
        base = RedisConnection.from_settings(settings)
        self.shards = tuple(
            RedisShard(
                dataclasses.replace(base, url=url),
                self.keys,
                max_memories=settings.max_memories_per_tenant,
            )
            for url in self.layout.urls
        )

    @property
    def home(self) -> RedisShard:
        """Shard 0: the namespace-wide records' home, and the one Redis of a one-shard
        deployment (benches and the chat journal use it)."""
        return self.shards[0]

    @property
    def connection(self) -> RedisConnection:
        return self.home.connection

    @cached_property
    def client(self) -> redis.Redis:
        """Shard 0's synchronous client (benches, the chat journal)."""
        return self.home.client

    def async_client(self) -> redis.asyncio.Redis:
        """A new asyncio client of shard 0: one belongs to one event loop."""
        return self.home.async_client()

    def shard_of(self, tenant: str) -> int:
        return self.router.shard_of(tenant)

    def owns(self, shard: int) -> Callable[[int], bool]:
        """Whether a partition's events and position belong on `shard`."""
        return lambda partition: self.layout.of_partition(partition) == shard

    # -- the ports ----------------------------------------------------------------------------

    def live_writers(self) -> list[tuple[ProjectionWriter, Generations]]:
        """Each shard's writer and the generations it reads, in shard order, on a connection
        of its own for the process's life (the worker)."""
        return [shard.live_writer() for shard in self.shards]

    @asynccontextmanager
    async def session(
        self, shard: int = 0, *, max_memories: int | None = None
    ) -> AsyncIterator[ProjectionSession]:
        """Shard `shard`'s writer, generations and comparer on one connection, closed on the
        way out (a rebuild, `verify`)."""
        async with self.shards[shard].session(max_memories=max_memories) as session:
            yield session

    def reader(self) -> MemoryLookup:
        if len(self.shards) == 1:
            return self.home.reader()
        return ShardedLookup(self.router, [shard.reader() for shard in self.shards])

    def recaller(
        self, embedders: Embedders, *, tuning: RecallTuning, deduplicate: bool = True
    ) -> Recaller:
        """Recall, each query embedded for the live generation's model (`embedders` has it)."""
        parts = [s.recaller(embedders, tuning=tuning, deduplicate=deduplicate) for s in self.shards]
        return parts[0] if len(parts) == 1 else ShardedRecaller(self.router, parts)

    def search(self, embedders: Embedders, *, tuning: RecallTuning) -> Search:
        """The HTTP API's and MCP tools' filtered, paged search: recall's ranking, filtered."""
        parts = [shard.search(embedders, tuning=tuning) for shard in self.shards]
        return parts[0] if len(parts) == 1 else ShardedSearch(self.router, parts)

    def check_model(self, embedders: Embedders) -> None:
        """Raise ConfigurationError (naming both models and the fix) if `embedders` cannot
        make vectors of the model any shard's live generation was built with."""
        for shard in self.shards:
            shard.check_model(embedders)

    def status(self) -> ProjectionProgress:
        """What the live projection has applied (`--wait`, stats, verify, erasure)."""
        if len(self.shards) == 1:
            return self.home.status()
        return ShardedProgress(self.router, [shard.status() for shard in self.shards])

    def shard_reports(self) -> list[ShardReport]:
        """Every shard's state (`stats`, `status`), reachable or not, in shard order."""
        return [shard.report(n) for n, shard in enumerate(self.shards)]

    def api_keys(self) -> ApiKeyStore:
        return self.home.api_keys()

    def processes(self) -> ProcessRegistry:
        return self.home.processes()

    # -- namespace-wide chores ----------------------------------------------------------------

    def rewrite_files(self, timeout_s: float, tenant: str | None = None) -> list[str]:
        """Rewrite the persistence files of `tenant`'s shard (every shard without one) so that
        deleted data is gone from disk (after an erasure); the files rewritten."""
        shards = self.shards if tenant is None else (self.shards[self.shard_of(tenant)],)
        return [done for shard in shards for done in shard.rewrite_files(timeout_s)]

    def access_command(self, role: str) -> str | None:
        """The `redis-cli` line that creates `role`'s Redis user (None: it uses no Redis); run
        it on every shard."""
        if role not in REDIS_ROLES:
            return None
        return f"redis-cli --tls ... {redis_acl_command(role, self.keys)}"

    def drop(self) -> None:
        """Delete every generation's index and keys of the namespace on every shard."""
        for shard in self.shards:
            shard.drop()
