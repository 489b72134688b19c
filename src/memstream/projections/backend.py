"""The Redis projection as one object: every part of the projection a process uses, built from
the Settings, and the only door into Redis for the rest of memstream.

`RedisProjection(settings)` hands out the ports of `memory.ports` — the writer, generations,
reader, recaller, progress (status), the server's API-key store, sessions' working memory,
the processes' heartbeats and the comparer of `verify` — plus the filtered search of the
HTTP API and the namespace-wide chores (rewriting Redis's files after an erasure, dropping
a namespace, a role's ACL line).
The composition root (`memstream.deployment`) builds it; nothing above `projections/` sees a
Redis client, a key or a URL.

Where the shard router goes (docs/scaling.md): every tenant-scoped part below is built over
`self.client` and `self.keys`. Sharding replaces that one client with the tenant's shard's —
`partition(tenant) mod shards` — inside this class (the reader, recaller, progress and search
pick their shard per tenant; the writer groups a batch by shard), while namespace-wide
records (API keys, heartbeats) keep one home. Callers do not change.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
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
    WorkingMemoryStore,
)
from memstream.memory.ranking.fusion import RecallTuning
from memstream.projections.acl import REDIS_ROLES, redis_acl_command
from memstream.projections.apikeys import RedisApiKeyStore
from memstream.projections.compare import GenerationsComparer, ProjectionComparer
from memstream.projections.connection import (
    RedisConnection,
    async_redis_client,
    compact,
    is_missing_index,
    redis_client,
    redis_errors,
    rewrite_persistence,
)
from memstream.projections.generations import RedisGenerations
from memstream.projections.live_model import LiveModel
from memstream.projections.processes import RedisProcessRegistry
from memstream.projections.reader import ProjectionReader
from memstream.projections.recall import RedisRecaller
from memstream.projections.schema import Keyspace
from memstream.projections.search import FilteredSearch
from memstream.projections.status import ProjectionStatus
from memstream.projections.working_memory import RedisWorkingMemoryStore
from memstream.projections.writer import RedisProjectionWriter

__all__ = ["RedisProjection"]

_DELETE_BATCH = 5000


class RedisProjection:
    """One namespace's projection in one Redis. Nothing connects until a part is used."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.keys = Keyspace(settings.namespace)
        self.connection = RedisConnection.from_settings(settings)

    @cached_property
    def client(self) -> redis.Redis:
        """The synchronous client every reading part shares (benches read through it too)."""
        return redis_client(self.connection)

    def async_client(self) -> redis.asyncio.Redis:
        """A new asyncio client: one belongs to one event loop, so each caller makes its own."""
        return async_redis_client(self.connection)

    @property
    def _url(self) -> str:
        return self.settings.redis

    # -- the ports ----------------------------------------------------------------------------

    def writer(self, *, max_memories: int | None = None) -> ProjectionWriter:
        """A writer on a connection of its own for the process's life; each tenant bounded
        to `max_memories` (default MEMSTREAM_MAX_MEMORIES_PER_TENANT)."""
        return self._writer(self.async_client(), max_memories)

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

    def recaller(
        self, embedders: Embedders, *, tuning: RecallTuning, deduplicate: bool = True
    ) -> Recaller:
        """Recall, each query embedded for the live generation's model (`embedders` has it)."""
        return self._recaller(embedders, tuning, deduplicate)

    def search(self, embedders: Embedders, *, tuning: RecallTuning) -> FilteredSearch:
        """The HTTP API's and MCP tools' filtered, paged search: recall's ranking, filtered."""
        return FilteredSearch(
            self.client, self.keys, self._recaller(embedders, tuning, True), url=self._url
        )

    def check_model(self, embedders: Embedders) -> None:
        """Raise ConfigurationError (naming both models and the fix) if `embedders` cannot
        make vectors of the model the live generation was built with."""
        LiveModel(self.client, self.keys, embedders, url=self._url).current()

    def status(self) -> ProjectionProgress:
        """What the live projection has applied (`--wait`, stats, verify, erasure)."""
        return ProjectionStatus(self.client, self.keys, url=self._url)

    def api_keys(self) -> ApiKeyStore:
        return RedisApiKeyStore(self.client, self.settings.namespace, url=self._url)

    def working_memory(self) -> WorkingMemoryStore:
        """Sessions' working memory (the HTTP API's and MCP's working-memory routes)."""
        return RedisWorkingMemoryStore(self.client, self.keys, url=self._url)

    def processes(self) -> ProcessRegistry:
        return RedisProcessRegistry(self.client, self.keys, url=self._url)

    # -- namespace-wide chores ----------------------------------------------------------------

    def rewrite_files(self, timeout_s: float) -> list[str]:
        """Rewrite Redis's persistence files so that deleted data is gone from its disk
        (after an erasure); the files rewritten."""
        with redis_errors(self._url, "rewriting Redis's files"):
            return rewrite_persistence(self.client, timeout_s)

    def access_command(self, role: str) -> str | None:
        """The `redis-cli` line that creates `role`'s Redis user (None: it uses no Redis)."""
        if role not in REDIS_ROLES:
            return None
        return f"redis-cli --tls ... {redis_acl_command(role, self.keys)}"

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

    def _recaller(
        self, embedders: Embedders, tuning: RecallTuning, deduplicate: bool
    ) -> RedisRecaller:
        return RedisRecaller(
            self.client,
            self.keys,
            embedders,
            url=self._url,
            tuning=tuning,
            deduplicate=deduplicate,
        )

    def _writer(
        self, client: redis.asyncio.Redis, max_memories: int | None
    ) -> RedisProjectionWriter:
        bound = self.settings.max_memories_per_tenant if max_memories is None else max_memories
        return RedisProjectionWriter(client, self.keys, max_memories=bound, url=self._url)
