"""Tombstone reads on an asyncio connection: the HTTP API's check, before a write, that none of
its ids was forgotten, without a thread and without holding up the event loop.

All the tenants asked of one shard are read with the live generation in one round trip
(`LiveReads`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import redis.asyncio

from memstream.projections.live_reads import LiveReads
from memstream.projections.schema import Keyspace

__all__ = ["RedisTombstones"]


class RedisTombstones:
    """One shard's tombstones, read on `client` (which belongs to the event loop using it)."""

    def __init__(self, client: redis.asyncio.Redis, keyspace: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._live = LiveReads(client, keyspace, url=url)

    async def forgotten(
        self, asked: Mapping[str, Collection[str]]
    ) -> dict[str, set[str] | Exception]:
        order = {tenant: list(ids) for tenant, ids in asked.items() if ids}

        def reads(pipe: redis.asyncio.client.Pipeline, keys: Keyspace) -> None:
            for tenant, ids in order.items():
                pipe.smismember(keys.forgotten(tenant), ids)

        replies = await self._live.read(reads, "reading tombstones")
        found: dict[str, set[str] | Exception] = {tenant: set() for tenant in asked}
        for (tenant, ids), flags in zip(order.items(), replies, strict=True):
            found[tenant] = {memory_id for memory_id, flag in zip(ids, flags, strict=True) if flag}
        return found

    async def aclose(self) -> None:
        await self._client.aclose()
