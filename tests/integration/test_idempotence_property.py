"""Property (real Redis): a sequence with duplicates and redeliveries projects to the same state
as the same sequence de-duplicated (first occurrences, in order)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memstream import Settings, TurnCompleted, memories_of
from memstream.memory.events import MemoriesConsolidated, MemoryEvent, MemoryForgotten
from memstream.memory.model import MemoryType
from memstream.memory.ports import Embedded
from memstream.projections.compare import ProjectionComparer
from memstream.projections.connection import async_redis_client
from memstream.projections.schema import Keyspace
from memstream.projections.writer import RedisProjectionWriter

from ..fuzzing import examples

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 1, tzinfo=UTC)
TENANT = "prop"


def _turn(n: int) -> TurnCompleted:
    at = T0 + timedelta(minutes=n % 4)
    return TurnCompleted(TENANT, f"th{n % 2}", "r", n, f"q{n}", f"a{n}", at, (n % 3) / 3, "m@1")


TURNS = [_turn(n) for n in range(6)]


def _ids(*turns: TurnCompleted) -> tuple[str, ...]:
    return tuple(m.id for t in turns for m in memories_of(t))


POOL: list[MemoryEvent] = [
    *TURNS,
    MemoryForgotten(TENANT, "f1", T0, memory_ids=_ids(TURNS[1])[:1]),
    MemoryForgotten(TENANT, "f2", T0, thread="th0", before=T0 + timedelta(minutes=1)),
    MemoriesConsolidated(
        TENANT, _ids(TURNS[2], TURNS[3]), "summary 2-3", MemoryType.TASK, "th0", T0, 0.8, "m@1"
    ),
    MemoriesConsolidated(
        TENANT,
        _ids(TURNS[4])[:1] + _ids(TURNS[5])[:1],
        "summary 4-5",
        MemoryType.ENTITY,
        "",
        T0,
        0.4,
        "m@1",
    ),
]


def _project(url: str, keys: Keyspace, events: list[MemoryEvent]) -> None:
    async def run() -> None:
        client = async_redis_client(url)
        try:
            writer = RedisProjectionWriter(client, keys, max_memories=6)
            for event in events:  # one at a time: redeliveries come in separate batches
                memories = memories_of(event)
                vectors = np.ones((len(memories), 4), dtype=np.float32)
                await writer.apply([Embedded(event, memories, vectors)], into=1)
        finally:
            await client.aclose()

    asyncio.run(run())


def _differences(url: str, one: Keyspace, other: Keyspace) -> list[str]:
    async def run() -> list[str]:
        client = async_redis_client(url)
        try:
            found = await ProjectionComparer(client).compare(one, other, TENANT)
            markers = [await client.hgetall(keys.applied(TENANT)) for keys in (one, other)]
        finally:
            await client.aclose()
        return [str(d) for d in found] + (
            ["applied markers differ"] if markers[0] != markers[1] else []
        )

    return asyncio.run(run())


@hypothesis_settings(
    max_examples=examples(25), suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=16))
def test_duplicates_and_redeliveries_project_like_the_deduplicated_log(
    settings: Settings, picks: list[int]
) -> None:
    delivered = [POOL[i] for i in picks]
    deduplicated = [POOL[i] for i in dict.fromkeys(picks)]
    run = uuid.uuid4().hex[:8]
    with_duplicates = Keyspace(f"{settings.namespace}-p{run}a")
    without = Keyspace(f"{settings.namespace}-p{run}b")

    _project(settings.redis, with_duplicates, delivered)
    _project(settings.redis, without, deduplicated)

    assert _differences(settings.redis, with_duplicates, without) == []
