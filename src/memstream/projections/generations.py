"""Projection generations: which one is live, new ones for rebuilds, the swap, and clean-up.

A rebuild never touches the live generation while it runs: it writes a fresh generation
(numbers come from a counter, so an abandoned rebuild never collides with the next), and
swap.lua swaps it in with one atomic script once its positions have caught up with the live
generation's, for every partition. A whole rebuild moves the generation pointer and the
recall alias together; a one-tenant rebuild renames the tenant's rebuilt keys over its live
ones. Writers re-read the pointer per batch and check it inside apply_once.lua, so nothing is
written into a retired generation after a swap.
"""

from __future__ import annotations

import redis.asyncio
from redis.commands.core import AsyncScript

from memstream.memory.ports import SwapResult
from memstream.projections.connection import compact_async, is_missing_index, redis_errors, text
from memstream.projections.schema import Keyspace, lua

__all__ = ["RedisGenerations"]

_SWAP = lua("swap.lua")


class RedisGenerations:
    def __init__(self, client: redis.asyncio.Redis, keyspace: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._keys = keyspace
        self._url = url
        self._swap: AsyncScript = client.register_script(_SWAP)

    async def live(self) -> int:
        with redis_errors(self._url, "reading the live generation"):
            raw = await self._client.get(self._keys.generation_key)
        return int(raw or 1)

    async def model(self, generation: int) -> str | None:
        """The embedding model `generation`'s vectors are of; None before its index exists."""
        with redis_errors(self._url, "reading a generation's embedding model"):
            raw = await self._client.hget(self._keys.at(generation).meta, "embedding_model")
        return None if raw is None else text(raw)

    async def allocate(self) -> int:
        """A generation number never used before in this namespace."""
        with redis_errors(self._url, "allocating a generation"):
            await self._client.set(self._keys.generation_counter, await self.live(), nx=True)
            return int(await self._client.incr(self._keys.generation_counter))

    async def swap_all(self, live: int, rebuilt: int) -> SwapResult:
        old, new = self._keys.at(live), self._keys.at(rebuilt)
        with redis_errors(self._url, "swapping in the rebuilt generation"):
            reply = await self._swap(
                keys=[old.generation_key, old.positions, new.positions],
                args=[live, "all", rebuilt, old.alias, new.index_name],
            )
        return SwapResult(int(reply))

    async def swap_tenant(self, live: int, rebuilt: int, tenant: str, partition: str) -> SwapResult:
        old, new = self._keys.at(live), self._keys.at(rebuilt)
        with redis_errors(self._url, "swapping in the tenant's rebuilt memories"):
            reply = await self._swap(
                keys=[
                    old.generation_key,
                    old.positions,
                    new.positions,
                    *old.tenant_keys(tenant),
                    *new.tenant_keys(tenant),
                ],
                args=[
                    live,
                    "tenant",
                    old.tenant_memory_prefix(tenant),
                    new.tenant_memory_prefix(tenant),
                    old.orders_prefix(tenant),
                    new.orders_prefix(tenant),
                    partition,
                ],
            )
        return SwapResult(int(reply))

    async def drop(self, generation: int) -> None:
        """Delete a generation that is not live: its index first, then every key."""
        keys = self._keys.at(generation)
        with redis_errors(self._url, "dropping a retired generation"):
            try:
                await self._client.ft(keys.index_name).dropindex(delete_documents=False)
            except redis.ResponseError as exc:
                if not is_missing_index(exc):
                    raise
            batch: list[bytes] = []
            deleted = 0
            async for key in self._client.scan_iter(match=f"{keys.generation_prefix}*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    deleted += await self._client.unlink(*batch)
                    batch = []
            if batch:
                deleted += await self._client.unlink(*batch)
            await compact_async(self._client, deleted)
