"""Redis used bare, as someone without memstream would call it: the benches' raw baselines.

A bench compares memstream with the least code that does the same job (`raw`, `recall`,
`restart`, `raw_http`). That code talks to Redis directly, and only this module of the benches
does: pipelined HSETs into an index made like memstream's, a KNN query written out by hand,
and the probes a restart is timed with.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.asyncio
from redis.commands.search.query import Query
from redisvl.index import AsyncSearchIndex

from memstream.memory.embeddings import Vectors
from memstream.memory.model import Memory
from memstream.memory.tenancy import tenant_token
from memstream.projections.connection import RedisConnection, async_redis_client
from memstream.projections.schema import (
    Fields,
    Keyspace,
    VectorType,
    memory_index_schema,
    to_hash,
)

__all__ = [
    "RawHashes",
    "RawSessions",
    "RedisProbe",
    "raw_knn",
    "raw_pipelined",
    "wait_until",
]


class RawHashes:
    """One pipelined HSET per memory into `keys`, indexed exactly as memstream's keyspace is
    (vectors of the same type), so the raw writes pay the same indexing cost; no markers, no
    eviction, no positions."""

    def __init__(
        self, connection: RedisConnection, keys: Keyspace, dims: int, vector_type: VectorType
    ) -> None:
        self._client = async_redis_client(connection)
        self._keys = keys
        self._dims = dims
        self._vector_type = vector_type

    async def create_index(self) -> None:
        index = AsyncSearchIndex(
            memory_index_schema(self._keys, self._dims, self._vector_type),
            redis_client=self._client,
        )
        if not await index.exists():
            await index.create(overwrite=False)

    async def write(self, memories: Sequence[Memory], vectors: Vectors) -> None:
        async with self._client.pipeline(transaction=False) as pipe:
            for memory, vector in zip(memories, vectors, strict=True):
                key = self._keys.memory(memory.tenant, memory.id)
                fields = to_hash(memory, vector, vector_type=self._vector_type)
                pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
            await pipe.execute()

    async def close(self) -> None:
        await self._client.aclose()


class RawSessions:
    """A session kept as one JSON string per key with a TTL: read with GET, written with SET,
    no version, no index (the least a session store does)."""

    def __init__(self, connection: RedisConnection, prefix: str) -> None:
        self._client = async_redis_client(connection)
        self._prefix = prefix

    async def get(self, session_id: str) -> bytes | str | None:
        found: bytes | str | None = await self._client.get(f"{self._prefix}:{session_id}")
        return found

    async def put(self, session_id: str, document: bytes, ttl_s: int) -> None:
        await self._client.set(f"{self._prefix}:{session_id}", document, ex=ttl_s)

    async def retired(self, ids: list[str]) -> list[bool]:
        """Which of `ids` are in the retired set (none are: the lookup is the cost)."""
        found = await self._client.smismember(f"{self._prefix}:retired", ids)
        return [bool(flag) for flag in found]

    async def close(self) -> None:
        await self._client.aclose()


def raw_knn(client: redis.Redis, index: str, tenant: str, vector: Vectors) -> Callable[[], Any]:
    """A tenant's 10 nearest memories, the query written out by hand as a redis-py user would."""
    query = (
        Query(
            f"(@{Fields.TENANT_TAG}:{{{tenant_token(tenant)}}})=>[KNN 10 @{Fields.EMBEDDING} "
            "$vector HYBRID_POLICY ADHOC_BF AS vector_distance]"
        )
        .return_fields(*Fields.RETURNED, "vector_distance")
        .sort_by("vector_distance")
        .paging(0, 10)
        .dialect(2)
    )
    params: dict[str, str | int | float | bytes] = {"vector": vector.tobytes()}
    return lambda: client.ft(index).search(query, query_params=params)


def raw_pipelined(client: redis.Redis, commands: Sequence[Sequence[Any]]) -> Callable[[], Any]:
    """`commands` sent in one pipeline, without a transaction, replies unparsed."""

    def send() -> Any:
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)  # type: ignore[no-untyped-call]
        return pipe.execute()

    return send


class RedisProbe:
    """What a restart bench asks of a Redis it started: does it answer, is an index whole; and
    what it does to the append-only file: rewrite it, or delete a namespace without a rewrite."""

    def __init__(self, url: str) -> None:
        self._url = url

    def _client(self) -> redis.Redis:
        return redis.Redis.from_url(self._url, socket_timeout=30)

    def answers(self) -> bool:
        try:
            return bool(self._client().ping())
        except redis.RedisError:
            return False

    def indexed(self, index: str) -> bool:
        info = self._client().ft(index).info()  # type: ignore[no-untyped-call]
        return float(info["percent_indexed"]) >= 1.0 and int(info["indexing"]) == 0

    def rewrite(self) -> None:
        client = self._client()
        client.bgrewriteaof()
        wait_until(lambda: int(client.info("persistence")["aof_rewrite_in_progress"]) == 0)

    def delete_without_rewrite(self, namespace: str) -> None:
        """What dropping a namespace did before issue 11: index and keys gone, the file as it
        was."""
        client = self._client()
        for raw in client.execute_command("FT._LIST"):  # type: ignore[no-untyped-call]
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            if name.startswith(f"{namespace}:"):
                client.execute_command("FT.DROPINDEX", name)  # type: ignore[no-untyped-call]
        batch = []
        for key in client.scan_iter(match=f"{namespace}:*", count=5000):
            batch.append(key)
            if len(batch) >= 5000:
                client.unlink(*batch)
                batch.clear()
        if batch:
            client.unlink(*batch)


def wait_until(condition: Callable[[], bool], timeout_s: float = 1800) -> float:
    """Poll `condition` every 50 ms; the monotonic time it first held."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"Redis did not get there in {timeout_s:g} s")
        time.sleep(0.05)
    return time.monotonic()
