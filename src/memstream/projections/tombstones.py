"""Tombstone reads on an asyncio connection: the HTTP API's check, before a write, that none of
its ids was forgotten, without a thread and without holding up the event loop.

All the tenants asked of one shard are read in one transaction with the live generation's
number, queued for the generation last seen and queued again when a swap has moved it since
(as `ProjectionStatus.read_live` reads synchronously).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import redis.asyncio

from memstream.projections.connection import redis_errors
from memstream.projections.schema import Keyspace

__all__ = ["RedisTombstones"]


class RedisTombstones:
    """One shard's tombstones, read on `client` (which belongs to the event loop using it)."""

    def __init__(self, client: redis.asyncio.Redis, keyspace: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._keys = keyspace
        self._url = url
        self._seen = 1  # the live generation as last read

    async def forgotten(
        self, asked: Mapping[str, Collection[str]]
    ) -> dict[str, set[str] | Exception]:
        order = {tenant: list(ids) for tenant, ids in asked.items() if ids}
        generation = self._seen
        while True:
            with redis_errors(self._url, "reading tombstones"):
                pipe = self._client.pipeline(transaction=True)
                pipe.get(self._keys.generation_key)
                keys = self._keys.at(generation)
                for tenant, ids in order.items():
                    pipe.smismember(keys.forgotten(tenant), ids)
                raw, *replies = await pipe.execute()
            live = int(raw or 1)
            self._seen = live
            if live == generation:
                break
            generation = live
        found: dict[str, set[str] | Exception] = {tenant: set() for tenant in asked}
        for (tenant, ids), flags in zip(order.items(), replies, strict=True):
            found[tenant] = {memory_id for memory_id, flag in zip(ids, flags, strict=True) if flag}
        return found

    async def aclose(self) -> None:
        await self._client.aclose()
