"""One Redis of the projection: every part of the projection over that one server.

`RedisShard(connection, keys, max_memories)` hands out the ports of `memory.ports` over one
Redis — the writer, generations, reader, recaller, progress (status), the server's API-key
store, the processes' heartbeats and the comparer of `verify` — plus the filtered search of
the HTTP API and the chores of one server (rewriting its files after an erasure, dropping a
namespace). `projections.backend.RedisProjection` holds one per shard and routes each tenant
to its own (`memory.sharding`); nothing above `projections/` sees one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from functools import cached_property

import redis
import redis.asyncio
from redis.commands.search.query import Query

from memstream.errors import InfrastructureError
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
    ShardReport,
    TokenLedger,
    TombstoneReader,
    WorkingMemoryStore,
)
from memstream.memory.ranking.fusion import RecallTuning
from memstream.memory.tenancy import tenant_from_token
from memstream.projections.api_keys import RedisApiKeyStore
from memstream.projections.compare import GenerationsComparer, ProjectionComparer
from memstream.projections.connection import (
    RedisConnection,
    async_redis_client,
    compact,
    is_missing_index,
    redis_client,
    redis_errors,
    rewrite_persistence,
    text,
)
from memstream.projections.generations import RedisGenerations
from memstream.projections.heartbeats import RedisProcessRegistry
from memstream.projections.items import RedisItemIndex
from memstream.projections.live_model import LiveModel
from memstream.projections.reader import ProjectionReader
from memstream.projections.recall import RedisRecaller
from memstream.projections.schema import Keyspace, VectorType
from memstream.projections.search import FilteredSearch
from memstream.projections.status import ProjectionStatus
from memstream.projections.token_ledger import RedisTokenLedger
from memstream.projections.tombstones import RedisTombstones
from memstream.projections.working_memory import RedisWorkingMemoryStore
from memstream.projections.writer import RedisProjectionWriter

__all__ = ["RedisShard"]

_DELETE_BATCH = 5000


class RedisShard:
    """One namespace's projection in one Redis. Nothing connects until a part is used."""

    def __init__(
        self,
        connection: RedisConnection,
        keys: Keyspace,
        *,
        max_memories: int,
        vector_type: VectorType = VectorType.FLOAT16,
    ) -> None:
        self.keys = keys
        self.connection = connection
        self._max_memories = max_memories
        self._vector_type = vector_type

    @cached_property
    def client(self) -> redis.Redis:
        """The synchronous client every reading part shares (benches read through it too)."""
        return redis_client(self.connection)

    def async_client(self) -> redis.asyncio.Redis:
        """A new asyncio client: one belongs to one event loop, so each caller makes its own."""
        return async_redis_client(self.connection)

    @property
    def _url(self) -> str:
        return self.connection.url

    # -- the ports ----------------------------------------------------------------------------

    def live_writer(self) -> tuple[ProjectionWriter, Generations]:
        """The worker's writer and the generations it reads (which is live, and which model
        each was built with), on one connection for the process's life."""
        client = self.async_client()
        return self._writer(client, None), RedisGenerations(client, self.keys, url=self._url)

    @asynccontextmanager
    async def session(self, *, max_memories: int | None = None) -> AsyncIterator[ProjectionSession]:
        """A writer, the generations and the comparer on one connection, closed on the way out
        (a rebuild, `verify`)."""
        client = self.async_client()
        try:
            yield ProjectionSession(
                writer=self._writer(client, max_memories),
                generations=RedisGenerations(client, self.keys, url=self._url),
                comparer=GenerationsComparer(ProjectionComparer(client, url=self._url), self.keys),
            )
        finally:
            await client.aclose()

    def reader(self) -> MemoryLookup:
        return ProjectionReader(self.client, self.keys, url=self._url)

    def recaller(self, embedders: Embedders, *, tuning: RecallTuning) -> Recaller:
        """Recall, each query embedded for the live generation's model (`embedders` has it)."""
        return self._recaller(embedders, tuning)

    def tombstones(self) -> TombstoneReader:
        """Tombstone reads on an asyncio client of its own (the server's write path)."""
        return RedisTombstones(self.async_client(), self.keys, url=self._url)

    def working_memory(self) -> WorkingMemoryStore:
        """Sessions' working memory on an asyncio client of its own (the server's loop)."""
        return RedisWorkingMemoryStore(self.async_client(), self.keys, url=self._url)

    def items(self, embedders: Embedders) -> ItemIndex:
        """A key-value store's items: field-by-field similarity and TTL refreshes."""
        return RedisItemIndex(self.client, self.keys, embedders, url=self._url)

    def search(self, embedders: Embedders, *, tuning: RecallTuning) -> FilteredSearch:
        """The HTTP API's and MCP tools' filtered, paged search: recall's ranking, filtered."""
        return FilteredSearch(
            self.client, self.keys, self._recaller(embedders, tuning), url=self._url
        )

    def check_model(self, embedders: Embedders) -> None:
        """Raise ConfigurationError (naming both models and the fix) if `embedders` cannot
        make vectors of the model the live generation was built with."""
        LiveModel(self.client, self.keys, embedders, url=self._url).current()

    def status(self) -> ProjectionProgress:
        """What the live projection has applied (`--wait`, stats, verify, erasure)."""
        return ProjectionStatus(self.client, self.keys, url=self._url)

    def report(self, shard: int) -> ShardReport:
        """This Redis as shard `shard` of the layout; unreachable is an answer, not an error."""
        try:
            status = ProjectionStatus(self.client, self.keys, url=self._url)
            live = status.live()
            positions = status.positions()
            with redis_errors(self._url, "reading the shard's memory and index"):
                try:
                    used = int(self.client.info("memory")["used_memory"])
                except redis.exceptions.NoPermissionError:  # a role without INFO: unknown
                    used = 0
                try:
                    found = self.client.ft(live.alias).search(Query("*").paging(0, 0))
                    memories = int(found.total)
                except redis.ResponseError as exc:
                    if not is_missing_index(exc):
                        raise
                    memories = 0
        except InfrastructureError as exc:
            return ShardReport(shard, self.connection.where, reachable=False, error=str(exc))
        return ShardReport(
            shard,
            self.connection.where,
            reachable=True,
            generation=live.generation,
            memories=memories,
            used_bytes=used,
            positions=positions,
        )

    def drop_moved(self, moved: Callable[[str], bool], fields: Collection[str]) -> int:
        """Delete, from the live generation, every tenant `moved` says lives on another shard
        now (its memories, markers, order set, thread orders and tombstones) and the positions
        `fields` of the partitions that moved (a reshard's last step); the number of tenants
        deleted."""
        live = ProjectionStatus(self.client, self.keys, url=self._url).live()
        pattern = f"{live.generation_prefix}applied:*"
        prefix = pattern[:-1]
        dropped = deleted = 0
        with redis_errors(self._url, "dropping the tenants that moved to another shard"):
            tokens = [text(key)[len(prefix) :] for key in self.client.scan_iter(match=pattern)]
            for tenant in (tenant_from_token(token) for token in tokens):
                if not moved(tenant):
                    continue
                keys = [
                    key
                    for prefix in (live.tenant_memory_prefix(tenant), live.orders_prefix(tenant))
                    for key in self.client.scan_iter(match=f"{prefix}*")
                ]
                deleted += int(self.client.unlink(*keys, *live.tenant_keys(tenant)))
                dropped += 1
            if fields:
                self.client.hdel(live.positions, *fields)
            compact(self.client, deleted)
        return dropped

    def api_keys(self) -> ApiKeyStore:
        return RedisApiKeyStore(self.client, self.keys.namespace, url=self._url)

    def processes(self) -> ProcessRegistry:
        return RedisProcessRegistry(self.client, self.keys, url=self._url)

    def token_ledger(self) -> TokenLedger:
        return RedisTokenLedger(self.client, self.keys.namespace, url=self._url)

    # -- namespace-wide chores ----------------------------------------------------------------

    def rewrite_files(self, timeout_s: float) -> list[str]:
        """Rewrite Redis's persistence files so that deleted data is gone from its disk
        (after an erasure); the files rewritten."""
        with redis_errors(self._url, "rewriting Redis's files"):
            return rewrite_persistence(self.client, timeout_s)

    def drop(self) -> None:
        """Delete every generation's index and keys of the namespace. Irreversible."""
        client = self.client
        prefixes = (f"{self.keys.namespace}:", f"{self.keys.namespace}-")
        for raw in client.execute_command("FT._LIST"):  # type: ignore[no-untyped-call]
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            if name.startswith(prefixes):
                try:
                    client.ft(name).dropindex(delete_documents=False)
                except redis.ResponseError as exc:  # dropped by someone else meanwhile
                    if not is_missing_index(exc):
                        raise
        deleted = 0
        for prefix in prefixes:
            batch = []
            for key in client.scan_iter(match=f"{prefix}*", count=_DELETE_BATCH):
                batch.append(key)
                if len(batch) >= _DELETE_BATCH:
                    deleted += int(client.unlink(*batch))
                    batch.clear()
            if batch:
                deleted += int(client.unlink(*batch))
        compact(client, deleted)  # keeps Redis's restarts short (docs/operations.md)

    def _recaller(self, embedders: Embedders, tuning: RecallTuning) -> RedisRecaller:
        return RedisRecaller(
            self.client,
            self.keys,
            embedders,
            url=self._url,
            tuning=tuning,
        )

    def _writer(
        self, client: redis.asyncio.Redis, max_memories: int | None
    ) -> RedisProjectionWriter:
        bound = self._max_memories if max_memories is None else max_memories
        return RedisProjectionWriter(
            client, self.keys, max_memories=bound, vector_type=self._vector_type, url=self._url
        )
