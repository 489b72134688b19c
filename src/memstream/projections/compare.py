"""Compare two generations of the Redis projection memory by memory: what `memstream verify`
reports. This module reads each generation's memories (from its eviction order) and tombstones;
what counts as a difference is the domain's (`memory.comparison`).
"""

from __future__ import annotations

from typing import cast

import redis.asyncio

from memstream.memory.comparison import differences
from memstream.memory.model import Memory
from memstream.memory.ports import Difference
from memstream.memory.tenancy import tenant_from_token
from memstream.projections.connection import redis_errors, text
from memstream.projections.schema import Fields, Keyspace, from_hash, memory_id_of

__all__ = ["GenerationsComparer", "ProjectionComparer"]

_VECTORS = {Fields.EMBEDDING, Fields.FACET_VECTORS}


class ProjectionComparer:
    """Compares two generations' keys (of one namespace or two) memory by memory."""

    def __init__(self, client: redis.asyncio.Redis, *, url: str = "") -> None:
        self._client = client
        self._url = url

    async def tenants(self, keys: Keyspace) -> set[str]:
        """Every tenant with memories or tombstones in `keys`' generation."""
        found: set[str] = set()
        with redis_errors(self._url, "listing tenants"):
            for kind in ("order", "forgotten"):
                pattern = f"{keys.generation_prefix}{kind}:*"
                async for key in self._client.scan_iter(match=pattern, count=1000):
                    found.add(tenant_from_token(text(key).rsplit(":", 1)[1]))
        return found

    async def compare(self, live: Keyspace, rebuilt: Keyspace, tenant: str) -> list[Difference]:
        live_memories = await self._memories(live, tenant)
        rebuilt_memories = await self._memories(rebuilt, tenant)
        with redis_errors(self._url, "reading tombstones"):
            live_dead = await self._client.smembers(live.forgotten(tenant))
            rebuilt_dead = await self._client.smembers(rebuilt.forgotten(tenant))
        return differences(
            tenant,
            live_memories,
            rebuilt_memories,
            {text(d) for d in live_dead},
            {text(d) for d in rebuilt_dead},
        )

    async def _memories(self, keys: Keyspace, tenant: str) -> dict[str, Memory | None]:
        """The tenant's memories by id, from its order set (None: the hash is missing)."""
        with redis_errors(self._url, "reading memories"):
            members = cast(list[bytes], await self._client.zrange(keys.order(tenant), 0, -1))
            pipe = self._client.pipeline(transaction=False)
            for member in members:
                pipe.hgetall(keys.memory(tenant, memory_id_of(text(member))))
            hashes = await pipe.execute()
        memories: dict[str, Memory | None] = {}
        for member, raw in zip(members, hashes, strict=True):
            memory_id = memory_id_of(text(member))
            fields = {text(k): text(v) for k, v in raw.items() if text(k) not in _VECTORS}
            memories[memory_id] = from_hash(fields) if fields else None
        return memories


class GenerationsComparer:
    """The `GenerationComparer` port: two generations of one namespace, named by number."""

    def __init__(self, comparer: ProjectionComparer, keyspace: Keyspace) -> None:
        self._comparer = comparer
        self._keys = keyspace

    async def tenants(self, generation: int) -> set[str]:
        return await self._comparer.tenants(self._keys.at(generation))

    async def compare(self, live: int, rebuilt: int, tenant: str) -> list[Difference]:
        return await self._comparer.compare(self._keys.at(live), self._keys.at(rebuilt), tenant)
