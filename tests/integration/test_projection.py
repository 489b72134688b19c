"""The projection's writer on the real Redis: apply-once and bound eviction in one script."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memstream import Settings, TurnCompleted, memories_of
from memstream.memory.ports import AppliedOutcome, Embedded, Position
from memstream.projections.connection import async_redis_client, redis_client
from memstream.projections.schema import Keyspace
from memstream.projections.writer import RedisProjectionWriter

pytestmark = pytest.mark.integration

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def embedded(tenant: str, turn: int, importance: float, minutes: int, offset: int = -1) -> Embedded:
    event = TurnCompleted(
        tenant,
        "t",
        "r",
        turn,
        f"q{turn}",
        f"a{turn}",
        T0 + timedelta(minutes=minutes),
        importance,
        "m@1",
    )
    position = Position("topic", 0, offset) if offset >= 0 else None
    return Embedded(event, memories_of(event), np.ones((2, 4), dtype=np.float32) / 2, position)


def apply(settings: Settings, items: list[Embedded], max_memories: int = 0) -> list[AppliedOutcome]:
    async def run() -> list[AppliedOutcome]:
        client = async_redis_client(settings.redis)
        try:
            writer = RedisProjectionWriter(
                client, Keyspace(f"{settings.namespace}-w"), max_memories=max_memories
            )
            await writer.ensure_live_index("m@1", 4)
            return await writer.apply(items)
        finally:
            await client.aclose()

    return asyncio.run(run())


def test_an_event_applies_once_and_a_replay_returns_the_recorded_outcome(
    settings: Settings,
) -> None:
    tenant = f"once-{uuid.uuid4().hex[:6]}"
    (first,) = apply(settings, [embedded(tenant, 1, 0.5, 0, offset=7)])
    (again,) = apply(settings, [embedded(tenant, 1, 0.5, 0, offset=8)])

    assert first.applied_now and not again.applied_now
    assert again.memory_ids == first.memory_ids and len(first.memory_ids) == 2
    keys = Keyspace(f"{settings.namespace}-w")
    client = redis_client(settings.redis)
    assert client.zcard(keys.order(tenant)) == 2
    # A duplicate writes nothing, but its marker shows this Redis holds it: the position moves.
    assert client.hget(keys.positions, "topic/0") == b"8"


def test_positions_move_over_unapplied_offsets_only_where_redis_holds_the_applied_ones(
    settings: Settings,
) -> None:
    async def run() -> list[bytes | None]:
        client = async_redis_client(settings.redis)
        keys = Keyspace(f"{settings.namespace}-adv-{uuid.uuid4().hex[:6]}")
        writer = RedisProjectionWriter(client, keys, max_memories=0)
        try:
            await writer.advance({"topic/0": 5})
            # Redis lost the event applied at 8 (a restart on older data): stay at 5.
            await writer.advance({"topic/0": 10}, held={"topic/0": 8})
            stayed = await client.hget(keys.at(1).positions, "topic/0")
            await writer.advance({"topic/0": 10}, held={"topic/0": 5})
            moved = await client.hget(keys.at(1).positions, "topic/0")
            return [stayed, moved]
        finally:
            await client.aclose()

    assert asyncio.run(run()) == [b"5", b"10"]


def test_each_write_evicts_lowest_importance_then_oldest_beyond_the_bound(
    settings: Settings,
) -> None:
    tenant = f"bound-{uuid.uuid4().hex[:6]}"
    low_new = embedded(tenant, 1, 0.2, 10)
    high_old = embedded(tenant, 2, 0.9, 0)
    mid_old = embedded(tenant, 3, 0.5, 1)
    mid_new = embedded(tenant, 4, 0.5, 20)

    outcomes = apply(settings, [low_new, high_old, mid_old, mid_new], max_memories=5)

    # The two memories of a turn tie on importance and time; the id breaks the tie.
    low_ids = sorted(m.id for m in low_new.memories)
    mid_old_ids = sorted(m.id for m in mid_old.memories)
    assert [o.evicted for o in outcomes] == [
        (),
        (),
        (low_ids[0],),  # 6 > 5: the least important goes
        (low_ids[1], mid_old_ids[0]),  # 7 > 5: then, at equal importance, the oldest
    ]
    client = redis_client(settings.redis)
    keys = Keyspace(f"{settings.namespace}-w")
    remaining = {m.rsplit(b":", 1)[1].decode() for m in client.zrange(keys.order(tenant), 0, -1)}
    kept = {m.id for m in high_old.memories + mid_new.memories} | {mid_old_ids[1]}
    assert remaining == kept
    for memory_id in low_ids + mid_old_ids[:1]:
        assert not client.exists(keys.memory(tenant, memory_id))
    for memory_id in kept:
        assert client.exists(keys.memory(tenant, memory_id))


def test_a_script_redis_lacks_is_loaded_and_each_call_runs_once(settings: Settings) -> None:
    # The writer calls its scripts by hash and loads one only when Redis answers NOSCRIPT
    # (after a restart): a script no process registered yet stands for a flushed one.
    unique = uuid.uuid4().hex
    key = f"{settings.namespace}-w:noscript:{unique}"

    async def run() -> tuple[list[object], object, list[bool]]:
        client = async_redis_client(settings.redis)
        try:
            writer = RedisProjectionWriter(
                client, Keyspace(f"{settings.namespace}-w"), max_memories=0
            )
            script = client.register_script(
                f"-- {unique}\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])"
            )
            before = await client.script_exists(script.sha)
            replies = await writer._each(script, [key], [[1], [10], [100]])
            return replies, await client.get(key), before
        finally:
            await client.aclose()

    replies, total, before = asyncio.run(run())
    assert before == [False]
    assert replies == [1, 11, 111] and total == b"111"  # run once each, after the load


def test_positions_follow_the_live_generation_across_a_swap(
    settings: Settings,
) -> None:
    keys = Keyspace(f"{settings.namespace}-pos-{uuid.uuid4().hex[:6]}")
    sync = redis_client(settings.redis)
    sync.hset(keys.at(1).positions, "topic/0", 5)
    sync.hset(keys.at(2).positions, "topic/0", 9)

    async def run() -> list[dict[str, int]]:
        client = async_redis_client(settings.redis)
        try:
            writer = RedisProjectionWriter(client, keys, max_memories=0)
            read = [await writer.positions()]  # no pointer yet: generation 1
            sync.set(keys.generation_key, 2)  # a swap, unseen by the writer
            read.append(await writer.positions())
            read.append(await writer.positions())
            return read
        finally:
            await client.aclose()

    assert asyncio.run(run()) == [{"topic/0": 5}, {"topic/0": 9}, {"topic/0": 9}]
