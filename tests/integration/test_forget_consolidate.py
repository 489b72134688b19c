"""Forgetting and consolidation, applied by the writer on the real Redis (one script each)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memstream import Settings, TurnCompleted, memories_of
from memstream.memory.events import MemoriesConsolidated, MemoryEvent, MemoryForgotten
from memstream.memory.model import MemoryType
from memstream.memory.ports import AppliedOutcome, Embedded
from memstream.projections.connection import async_redis_client, redis_client
from memstream.projections.schema import Keyspace
from memstream.projections.writer import RedisProjectionWriter

from .helpers import said_in_threads, thread_orders

pytestmark = pytest.mark.integration

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def turn(tenant: str, n: int, *, thread: str = "t", minutes: int = 0) -> TurnCompleted:
    at = T0 + timedelta(minutes=minutes)
    return TurnCompleted(tenant, thread, "r", n, f"q{n}", f"a{n}", at, 0.5, "m@1")


def forget(tenant: str, **selector: object) -> MemoryForgotten:
    return MemoryForgotten(tenant, uuid.uuid4().hex, T0, **selector)  # type: ignore[arg-type]


def consolidate(tenant: str, ids: tuple[str, ...]) -> MemoriesConsolidated:
    return MemoriesConsolidated(
        tenant, ids, "a summary", MemoryType.KNOWLEDGE, "t", T0, 0.9, "m@1", {"k": "v"}
    )


class Writer:
    def __init__(self, settings: Settings, max_memories: int = 0) -> None:
        self.keys = Keyspace(f"{settings.namespace}-fc")
        self.url = settings.redis
        self.max_memories = max_memories
        self.redis = redis_client(settings.redis)

    def apply(self, *events: MemoryEvent) -> list[AppliedOutcome]:
        async def run() -> list[AppliedOutcome]:
            client = async_redis_client(self.url)
            try:
                writer = RedisProjectionWriter(client, self.keys, max_memories=self.max_memories)
                await writer.ensure_live_index("m@1", 4)
                items = []
                for event in events:
                    memories = memories_of(event)
                    vectors = np.ones((len(memories), 4), dtype=np.float32) / 2
                    items.append(Embedded(event, memories, vectors))
                return await writer.apply(items)
            finally:
                await client.aclose()

        return asyncio.run(run())

    def stored(self, tenant: str) -> set[str]:
        members = self.redis.zrange(self.keys.order(tenant), 0, -1)
        ids = {m.decode().rsplit(":", 1)[1] for m in members}
        hashes = {
            k.decode().rsplit(":", 1)[1]
            for k in self.redis.scan_iter(match=f"{self.keys.tenant_memory_prefix(tenant)}*")
        }
        assert ids == hashes  # the order set and the hashes never disagree
        assert thread_orders(self.redis, self.keys, tenant) == said_in_threads(
            self.redis, self.keys, tenant, hashes
        )
        return ids


@pytest.fixture
def writer(settings: Settings) -> Writer:
    return Writer(settings)


def ids_of(*events: MemoryEvent) -> list[str]:
    return [m.id for e in events for m in memories_of(e)]


def test_forget_by_ids_deletes_and_tombstones_even_ids_not_yet_stored(writer: Writer) -> None:
    tenant = f"f-{uuid.uuid4().hex[:6]}"
    one, two, later = turn(tenant, 1), turn(tenant, 2), turn(tenant, 3)
    writer.apply(one, two)

    (outcome,) = writer.apply(forget(tenant, memory_ids=[*ids_of(one), *ids_of(later)]))
    # An event arriving after the forget that writes a forgotten id writes nothing of it.
    (late,) = writer.apply(later)

    assert outcome.applied_now and sorted(outcome.removed) == sorted(ids_of(one))
    assert late.applied_now and late.memory_ids == ()
    assert writer.stored(tenant) == set(ids_of(two))


def test_forget_by_thread_and_before_and_everything(writer: Writer) -> None:
    tenant = f"f-{uuid.uuid4().hex[:6]}"
    old_a, new_a = turn(tenant, 1, thread="a", minutes=0), turn(tenant, 2, thread="a", minutes=9)
    old_b, new_b = turn(tenant, 3, thread="b", minutes=0), turn(tenant, 4, thread="b", minutes=9)
    writer.apply(old_a, new_a, old_b, new_b)

    writer.apply(forget(tenant, thread="a", before=T0 + timedelta(minutes=5)))
    assert writer.stored(tenant) == set(ids_of(new_a, old_b, new_b))
    writer.apply(forget(tenant, thread="b"))
    assert writer.stored(tenant) == set(ids_of(new_a))
    writer.apply(forget(tenant, everything=True))
    assert writer.stored(tenant) == set()
    dead = {d.decode() for d in writer.redis.smembers(writer.keys.forgotten(tenant))}
    assert dead == set(ids_of(old_a, new_a, old_b, new_b))


def test_a_forget_is_applied_once_and_a_repeat_returns_its_outcome(writer: Writer) -> None:
    tenant = f"f-{uuid.uuid4().hex[:6]}"
    one = turn(tenant, 1)
    request = forget(tenant, everything=True)
    writer.apply(one)
    (first,) = writer.apply(request)
    writer.apply(turn(tenant, 2))
    (again,) = writer.apply(request)
    assert first.applied_now and not again.applied_now
    assert again.removed == first.removed
    assert writer.stored(tenant) == set(ids_of(turn(tenant, 2)))  # the repeat forgot nothing


def test_a_consolidation_replaces_its_whole_group_with_the_summary(writer: Writer) -> None:
    tenant = f"c-{uuid.uuid4().hex[:6]}"
    one, two, other = turn(tenant, 1), turn(tenant, 2), turn(tenant, 3)
    writer.apply(one, two, other)
    event = consolidate(tenant, tuple(ids_of(one, two)))

    (outcome,) = writer.apply(event)

    (summary,) = memories_of(event)
    assert outcome.applied_now and not outcome.skipped
    assert sorted(outcome.removed) == sorted(ids_of(one, two))
    assert writer.stored(tenant) == {summary.id, *ids_of(other)}
    stored = writer.redis.hgetall(writer.keys.memory(tenant, summary.id))
    assert stored[b"memory_type"] == b"knowledge" and stored[b"content"] == b"a summary"
    assert stored[b"importance"] == b"0.9"


def test_a_consolidation_with_a_member_gone_is_skipped_whole(writer: Writer) -> None:
    tenant = f"c-{uuid.uuid4().hex[:6]}"
    one, two = turn(tenant, 1), turn(tenant, 2)
    writer.apply(one, two)
    writer.apply(forget(tenant, memory_ids=ids_of(two)[:1]))
    event = consolidate(tenant, tuple(ids_of(one, two)))

    (outcome,) = writer.apply(event)
    (again,) = writer.apply(event)

    assert outcome.applied_now and outcome.skipped == "members_missing"
    assert outcome.missing == tuple(ids_of(two)[:1]) and outcome.removed == ()
    assert (again.applied_now, again.skipped, again.missing) == (
        False,
        outcome.skipped,
        outcome.missing,
    )
    assert writer.stored(tenant) == set(ids_of(one)) | {ids_of(two)[1]}


def test_a_consolidation_is_bounded_like_any_write(settings: Settings) -> None:
    writer = Writer(settings, max_memories=3)
    tenant = f"c-{uuid.uuid4().hex[:6]}"
    one, two = turn(tenant, 1, minutes=1), turn(tenant, 2, minutes=2)
    writer.apply(one, two)  # 4 memories, bound 3: one evicted already
    kept = writer.stored(tenant)
    event = consolidate(tenant, tuple(sorted(kept)[:2]))
    (outcome,) = writer.apply(event)
    assert outcome.applied_now and len(writer.stored(tenant)) <= 3
