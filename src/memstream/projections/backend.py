"""The Redis projection as one object: every part of the projection a process uses, built from
the Settings, and the only door into Redis for the rest of memstream.

`RedisProjection(settings, partition_of)` holds one `RedisShard` per Redis of the shard
layout and hands out the ports of `memory.ports`: tenant-scoped reads (reader, recaller,
search, progress) go to the tenant's shard (`memory.sharding`); the worker, `replay` and
`verify` take a shard's writer, generations and comparer one shard at a time
(`live_writer(url)`, `session(shard)`), since positions, generations and swaps are each
shard's own. API keys, heartbeats and the layout itself live on shard 0; sessions' working
memory lives on the tenant's shard.

The layout is MEMSTREAM_REDIS_SHARDS (else the one MEMSTREAM_REDIS_URL) until `memstream
reshard` stores a newer one on shard 0 (`projections.layout_store`); every process re-reads
it once its reading is `LAYOUT_REFRESH_S` old, in the background so that no routed call waits
on the read, and follows a newer one without a restart. The composition root
(`memstream.deployment`) builds it; nothing above `projections/` sees a Redis client, a key or
a URL.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import cached_property
from typing import Generic, TypeVar

import redis
import redis.asyncio

from memstream.agent.journal import Journal
from memstream.config import Settings
from memstream.errors import InfrastructureError, MemstreamError
from memstream.memory.embeddings import Embedders
from memstream.memory.ports import (
    ApiKeyStore,
    Generations,
    ItemIndex,
    MemoryLookup,
    ProcessRegistry,
    ProjectionProgress,
    ProjectionSession,
    ProjectionWriter,
    Recaller,
    Resharding,
    SessionMove,
    ShardLayout,
    ShardReport,
    TokenLedger,
    TombstoneReader,
    WorkingMemoryStore,
)
from memstream.memory.ranking.fusion import RecallTuning
from memstream.memory.search import MemorySearch
from memstream.memory.sharding import (
    ShardedItems,
    ShardedLookup,
    ShardedProgress,
    ShardedRecaller,
    ShardedSearch,
    ShardedTombstones,
    ShardedWorkingMemory,
    TenantRouter,
)
from memstream.projections.acl import REDIS_ROLES, redis_acl_command
from memstream.projections.connection import RedisConnection
from memstream.projections.journal import RedisJournal
from memstream.projections.layout_store import RedisLayoutStore
from memstream.projections.schema import Keyspace, VectorType
from memstream.projections.session_moves import RedisSessionMove
from memstream.projections.shard import RedisShard

__all__ = ["LAYOUT_REFRESH_S", "RedisProjection"]

log = logging.getLogger(__name__)

# How long a process routes by the layout it read before it reads the stored one again.
LAYOUT_REFRESH_S = 1.0
# A reading this many refresh intervals old is waited for; younger, a call routes by it while
# a new one is read in the background. So no call routes by a reading older than this
# (`layout_window_s`: the longest a moved tenant may reach its old shard after a switch).
_WINDOW_REFRESHES = 1.5

T = TypeVar("T")


class _PerShard(Generic[T]):
    """One part per shard of the current layout, made on first use and kept by URL (a shard
    that stays across a reshard keeps its part and connection)."""

    def __init__(self, projection: RedisProjection, make: Callable[[RedisShard], T]) -> None:
        self._projection = projection
        self._make = make
        self._made: dict[str, T] = {}

    def of(self, tenant: str) -> T:
        layout = self._projection.current_layout()
        return self._at(layout.urls[self._projection.router.shard_in(layout, tenant)])

    def home(self) -> T:
        return self._at(self._projection.current_layout().urls[0])

    def owned(self) -> list[tuple[T, Callable[[int], bool]]]:
        layout = self._projection.current_layout()
        return [(self._at(url), _owner(layout, shard)) for shard, url in enumerate(layout.urls)]

    def _at(self, url: str) -> T:
        if url not in self._made:
            self._made[url] = self._make(self._projection.shard(url))
        return self._made[url]


class RedisProjection:
    """One namespace's projection over its Redis shards. Nothing connects until a part is
    used. `partition_of` is the producers' tenant -> partition function (only asked when
    there is more than one shard)."""

    def __init__(
        self,
        settings: Settings,
        partition_of: Callable[[str], int],
        *,
        layout_refresh_s: float = LAYOUT_REFRESH_S,
    ) -> None:
        self.settings = settings
        self.keys = Keyspace(settings.namespace)
        self._base = RedisConnection.from_settings(settings)
        self._layout = ShardLayout(settings.shard_urls)
        self.layout_refresh_s = layout_refresh_s
        self._read_at = -math.inf  # when the last reading started; never yet
        self._lock = threading.Lock()  # one reading at a time
        self._refreshing = threading.Lock()  # held while a background reading runs
        self._shards: dict[str, RedisShard] = {}
        self.router = TenantRouter(self.current_layout, partition_of)
        self.home = self.shard(self._layout.urls[0])

    # -- the layout -------------------------------------------------------------------------

    def current_layout(self) -> ShardLayout:
        """The layout to route by now: the stored one if newer than what this process holds.
        Once the last reading is `layout_refresh_s` old the stored one is read again in the
        background and the call goes on with the one held; a process idle for longer than
        `layout_window_s` waits for the reading (a shard 0 that does not answer keeps the
        last one read)."""
        age = time.monotonic() - self._read_at
        if age >= self.layout_window_s:
            self._read()
        elif age >= self.layout_refresh_s and self._refreshing.acquire(blocking=False):
            threading.Thread(target=self._read_in_background, daemon=True).start()
        return self._layout

    @property
    def layout_window_s(self) -> float:
        """The oldest reading a call routes by: the longest after a reshard's switch that a
        process may still route a moved tenant to its old shard."""
        return _WINDOW_REFRESHES * self.layout_refresh_s

    def _read_in_background(self) -> None:
        try:
            self._read()
        except MemstreamError as exc:  # a caller meets it: the next reading is waited for
            log.warning("reading the shard layout failed: %s", exc)
        finally:
            self._refreshing.release()

    def _read(self) -> None:
        """Read the stored layout, unless another thread started a reading meanwhile."""
        with self._lock:
            started = time.monotonic()
            if started - self._read_at < self.layout_refresh_s:
                return
            previous, self._read_at = self._read_at, started
            try:
                stored = self.layouts().read()
            except InfrastructureError:
                return
            except MemstreamError:  # not a passing outage (an ACL): let a caller see it
                self._read_at = previous
                raise
            if stored is not None and stored.version > self._layout.version:
                self._layout = stored

    def layouts(self) -> RedisLayoutStore:
        """Where the layout is stored (shard 0)."""
        return RedisLayoutStore(self.home.client, self.keys, url=self.home.connection.url)

    def shard(self, url: str) -> RedisShard:
        """The shard at `url` (made once per process; a URL of the layout, or of `reshard`)."""
        if url not in self._shards:
            self._shards[url] = RedisShard(
                dataclasses.replace(self._base, url=url),
                self.keys,
                max_memories=self.settings.max_memories_per_tenant,
                vector_type=VectorType(self.settings.vector_type),
            )
        return self._shards[url]

    @property
    def shards(self) -> tuple[RedisShard, ...]:
        """The shards of the current layout, in shard order."""
        return tuple(self.shard(url) for url in self.current_layout().urls)

    def shard_of(self, tenant: str) -> int:
        return self.router.shard_of(tenant)

    def owns(self, shard: int) -> Callable[[int], bool]:
        """Whether a partition's events and position belong on `shard` (of the layout now)."""
        return _owner(self.current_layout(), shard)

    # -- the home's one client (benches, the chat journal) ----------------------------------

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

    # -- the ports ----------------------------------------------------------------------------

    def live_writer(self, url: str) -> tuple[ProjectionWriter, Generations]:
        """Shard `url`'s writer and the generations it reads, on a connection of its own for
        the process's life (the worker: `ShardWriters`)."""
        return self.shard(url).live_writer()

    @asynccontextmanager
    async def session(
        self, shard: int | str = 0, *, max_memories: int | None = None
    ) -> AsyncIterator[ProjectionSession]:
        """Shard `shard`'s (a number of the layout now, or a URL) writer, generations and
        comparer on one connection, closed on the way out (a rebuild, `verify`, a reshard's
        warm-up)."""
        part = self.shard(shard) if isinstance(shard, str) else self.shards[shard]
        async with part.session(max_memories=max_memories) as session:
            yield session

    def resharding(self) -> Resharding:
        """Moving the projection onto other shards (`operations.reshard`)."""
        return RedisResharding(self)

    def reader(self) -> MemoryLookup:
        return ShardedLookup(_PerShard(self, RedisShard.reader))

    def recaller(self, embedders: Embedders, *, tuning: RecallTuning) -> Recaller:
        """Recall, each query embedded for the live generation's model (`embedders` has it)."""
        return ShardedRecaller(_PerShard(self, lambda s: s.recaller(embedders, tuning=tuning)))

    def items(self, embedders: Embedders) -> ItemIndex:
        """A key-value store's items (field-by-field similarity, TTL refreshes), each tenant's
        on its shard."""
        return ShardedItems(_PerShard(self, lambda s: s.items(embedders)))

    def search(self, embedders: Embedders, *, tuning: RecallTuning) -> MemorySearch:
        """The HTTP API's and MCP tools' filtered, paged search: recall's ranking, filtered."""
        return ShardedSearch(_PerShard(self, lambda s: s.search(embedders, tuning=tuning)))

    def check_model(self, embedders: Embedders) -> None:
        """Raise ConfigurationError (naming both models and the fix) if `embedders` cannot
        make vectors of the model any shard's live generation was built with."""
        for shard in self.shards:
            shard.check_model(embedders)

    def status(self) -> ProjectionProgress:
        """What the live projection has applied (`--wait`, stats, verify, erasure)."""
        return ShardedProgress(_PerShard(self, RedisShard.status))

    def shard_reports(self) -> list[ShardReport]:
        """Every shard's state (`stats`, `status`), reachable or not, in shard order."""
        return [shard.report(n) for n, shard in enumerate(self.shards)]

    def api_keys(self) -> ApiKeyStore:
        return self.home.api_keys()

    def journal(self) -> Journal:
        """The agent runtime's durable effects journal (`memstream chat`'s runs recover from it)."""
        return RedisJournal(self.client, self.settings.namespace)

    def tombstones(self) -> TombstoneReader:
        """The server's tombstone check before a write, each tenant's on its shard, on
        asyncio clients of its own: use it on one event loop and close it there."""
        return ShardedTombstones(_PerShard(self, RedisShard.tombstones))

    def working_memory(self) -> WorkingMemoryStore:
        """Sessions' working memory (the HTTP API's and MCP's working-memory routes), each
        tenant's on its shard, on asyncio clients of its own: use it on one event loop and
        close it there."""
        return ShardedWorkingMemory(_PerShard(self, RedisShard.working_memory))

    def processes(self) -> ProcessRegistry:
        return self.home.processes()

    def token_ledger(self) -> TokenLedger:
        return self.home.token_ledger()

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


def _owner(layout: ShardLayout, shard: int) -> Callable[[int], bool]:
    """Whether a partition is `shard`'s in `layout`."""
    return lambda partition: layout.of_partition(partition) == shard


class RedisResharding:
    """The `Resharding` port over a `RedisProjection`: the layout on shard 0, each shard by
    URL."""

    def __init__(self, projection: RedisProjection) -> None:
        self._projection = projection

    @property
    def window_s(self) -> float:
        return self._projection.layout_window_s

    def stored(self) -> ShardLayout | None:
        return self._projection.layouts().read()

    def publish(self, layout: ShardLayout, *, replaces: int) -> bool:
        return self._projection.layouts().publish(layout, replaces=replaces)

    def session(self, url: str) -> AbstractAsyncContextManager[ProjectionSession]:
        return self._projection.session(url)

    def positions(self, url: str) -> Mapping[str, int]:
        return self._projection.shard(url).status().positions()

    def session_move(self, source_url: str, target_url: str) -> SessionMove:
        source, target = self._projection.shard(source_url), self._projection.shard(target_url)
        return RedisSessionMove(
            source.client,
            target.client,
            self._projection.keys,
            source_url=source.connection.url,
            target_url=target.connection.url,
        )

    def drop_moved(self, url: str, moved: Callable[[str], bool], fields: Collection[str]) -> int:
        return self._projection.shard(url).drop_moved(moved, fields)
