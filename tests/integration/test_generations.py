"""Generations on the real Redis: the swap's three answers, and writers following a swap."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import numpy as np
import pytest

from memstream import Settings, TurnCompleted, memories_of
from memstream.memory.ports import Embedded, Position, SwapResult
from memstream.projections.connection import async_redis_client, redis_client
from memstream.projections.generations import RedisGenerations
from memstream.projections.schema import Keyspace
from memstream.projections.writer import RedisProjectionWriter

pytestmark = pytest.mark.integration

AT = datetime(2026, 2, 1, tzinfo=UTC)


def item(tenant: str, n: int, offset: int) -> Embedded:
    event = TurnCompleted(tenant, "t", "r", n, f"q{n}", f"a{n}", AT, 0.5, "m@1")
    vectors = np.ones((2, 4), dtype=np.float32)
    return Embedded(event, memories_of(event), vectors, Position("log", 0, offset))


def test_swap_waits_for_the_rebuild_to_catch_up_then_moves_generation_and_alias(
    settings: Settings,
) -> None:
    keys = Keyspace(f"{settings.namespace}-gen{uuid.uuid4().hex[:6]}")
    sync = redis_client(settings.redis)

    async def run() -> None:
        client = async_redis_client(settings.redis)
        try:
            writer = RedisProjectionWriter(client, keys, max_memories=0)
            generations = RedisGenerations(client, keys)
            await writer.ensure_live_index("m@1", 4)
            await writer.apply([item("a", 1, 0), item("a", 2, 1)])  # live: generation 1
            rebuilt = await generations.allocate()
            assert rebuilt == 2 and await generations.allocate() == 3  # never handed out twice
            await writer.ensure_index("m@1", 4, rebuilt)
            await writer.apply([item("a", 1, 0)], into=rebuilt)

            assert await generations.swap_all(1, rebuilt) is SwapResult.BEHIND
            assert await generations.live() == 1
            await writer.apply([item("a", 2, 1)], into=rebuilt)
            assert await generations.swap_all(1, rebuilt) is SwapResult.SWAPPED
            assert await generations.live() == rebuilt
            info = sync.ft(keys.alias).info()
            assert info["index_name"] in (
                keys.at(rebuilt).index_name,
                keys.at(rebuilt).index_name.encode(),
            )
            assert await generations.swap_all(1, 3) is SwapResult.STALE

            # A writer that read generation 1 before the swap lands in generation 2 anyway.
            (late,) = await writer.apply([item("a", 3, 2)])
            assert late.applied_now
            assert sync.zcard(keys.at(rebuilt).order("a")) == 6
            assert not sync.exists(keys.at(1).memory("a", late.memory_ids[0]))
            await generations.drop(1)
            assert list(sync.scan_iter(match=f"{keys.at(1).generation_prefix}*")) == []
        finally:
            await client.aclose()

    asyncio.run(run())


def test_a_write_checked_against_a_retired_generation_is_refused_and_redone(
    settings: Settings,
) -> None:
    keys = Keyspace(f"{settings.namespace}-gen{uuid.uuid4().hex[:6]}")
    sync = redis_client(settings.redis)

    async def run() -> None:
        client = async_redis_client(settings.redis)
        try:
            writer = RedisProjectionWriter(client, keys, max_memories=0)
            generations = _SwapsOnFirstRead(client, keys, sync)
            writer._generations = generations  # the swap lands between the read and the write
            (outcome,) = await writer.apply([item("b", 1, 0)])
            assert outcome.applied_now and generations.reads == 2
            assert sync.zcard(keys.at(2).order("b")) == 2
            assert sync.zcard(keys.at(1).order("b")) == 0
        finally:
            await client.aclose()

    asyncio.run(run())


class _SwapsOnFirstRead(RedisGenerations):
    def __init__(self, client, keys: Keyspace, sync) -> None:  # type: ignore[no-untyped-def]
        super().__init__(client, keys)
        self._sync, self._keys_ = sync, keys
        self.reads = 0

    async def live(self) -> int:
        self.reads += 1
        generation = await super().live()
        if self.reads == 1:
            self._sync.set(self._keys_.generation_key, 2)
        return generation
