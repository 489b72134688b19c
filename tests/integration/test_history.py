"""Lineage on the real stack: a tenant's memory as of a moment equals a real rebuild of its
log truncated there (less what was forgotten since), and history and diff tell what happened."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from memstream import Settings
from memstream.deployment import Deployment
from memstream.errors import MemoryNotFoundError
from memstream.memory.bounds import Bounds
from memstream.memory.embeddings import Vectors
from memstream.memory.events import (
    MemoryEvent,
    MemoryForgotten,
    MemorySaved,
    TenantErased,
    memories_of,
)
from memstream.memory.model import Memory, MemoryType
from memstream.operations import drop, erase_tenant
from memstream.streams.lineage import Lineage
from memstream.streams.topics import ensure_topics

from .commands import memstream
from .helpers import TestStack
from .test_rebuild import workload

pytestmark = pytest.mark.integration


def fact(stack: TestStack, tenant: str, content: str) -> MemorySaved:
    return MemorySaved(
        tenant=tenant, memory_id="vpn-site", thread="facts", content=content,
        memory_type=MemoryType.USER_FACT, role="user", saved_at=datetime.now(UTC),
        importance=0.95, embedding_model=stack.model_id,
    )  # fmt: skip


def rebuilt_at(settings: Settings, stack: TestStack, tenant: str, at: datetime) -> list[Memory]:
    """A real rebuild (memstream's Replayer, into a namespace of its own) of the tenant's
    records whose log time is at or before `at`, byte for byte as the log holds them."""
    records = stack.read_topic(
        stack.topics.memory, lambda rs: any(r.timestamp / 1000 > at.timestamp() for r in rs)
    )
    kept = [r for r in records if r.key == tenant.encode() and r.timestamp / 1000 <= at.timestamp()]
    copy = dataclasses.replace(settings, namespace=f"{settings.namespace}-cut")
    copied = TestStack(copy)
    deployment = Deployment(copy)
    try:
        asyncio.run(ensure_topics(copied.kafka, copied.topics))
        for record in kept:
            copied.publish_raw(record.key, record.value)

        async def rebuild() -> None:
            async with deployment.replayer() as replayer:
                await replayer.rebuild(swap=True)

        asyncio.run(rebuild())
        return deployment.reader().memories(tenant)
    finally:
        drop(deployment)


def test_as_of_equals_a_rebuild_of_the_truncated_log_less_what_was_forgotten_since(
    stack: TestStack, settings: Settings, env: dict[str, str]
) -> None:
    tenant = f"asof-{uuid.uuid4().hex[:6]}"
    turns, first = workload(stack, tenant)  # evictions, a consolidation, a forget, a skip
    first_fact = fact(stack, tenant, "The VPN gateway is in Dublin.")
    before: list[MemoryEvent] = [*first, first_fact]  # type: ignore[list-item]
    stack.publish(before)
    stack.wait_applied(before)
    middle = datetime.now(UTC)

    kept_then = memories_of(turns[3])[0].id  # importance 0.9: never evicted
    later: list[MemoryEvent] = [
        fact(stack, tenant, "The VPN gateway moved to Cork."),
        MemoryForgotten(tenant, uuid.uuid4().hex, datetime.now(UTC), memory_ids=(kept_then,)),
        *(stack.turn(tenant, f"later {n}", "ok", thread="later", turn=n) for n in range(8)),
    ]
    stack.publish(later)
    stack.wait_applied(later)

    rebuilt = rebuilt_at(settings, stack, tenant, middle)
    assert kept_then in {m.id for m in rebuilt}  # the truncated log still held it
    lineage = Deployment(settings).lineage()
    view = lineage.view(tenant, middle)
    expected = {(m.id, m.content) for m in rebuilt if m.id != kept_then}
    assert {(m.id, m.content) for m in view} == expected
    assert len(view) == len(expected) > 0

    # At the end of the log the view is the live projection, exactly.
    live = Deployment(settings).reader().memories(tenant)
    assert {(m.id, m.content) for m in lineage.view(tenant, datetime.now(UTC))} == {
        (m.id, m.content) for m in live
    }

    # Through the CLI, as a user asks.
    asked = memstream(
        env, "recall", "--tenant", tenant, "--as-of", middle.isoformat(), "--json", "VPN gateway"
    )
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)[0]["content"] == "The VPN gateway is in Dublin."

    shown = memstream(env, "history", "--tenant", tenant, "--json", "vpn-site")
    assert shown.returncode == 0, shown.stderr
    assert [h["change"] for h in json.loads(shown.stdout)] == ["recorded", "edited"]
    gone = json.loads(memstream(env, "history", "--tenant", tenant, "--json", kept_then).stdout)
    assert [h["change"] for h in gone] == ["recorded", "forgotten"]
    assert gone[-1]["event_type"] == "MemoryForgotten" and gone[-1]["offset"] >= 0
    evicted = [
        i for i, ts in lineage.log(tenant).touches.items() if ts[-1].change.value == "evicted"
    ]
    assert evicted, "the workload passes the bound: something was evicted"

    changed = memstream(
        env, "diff", "--tenant", tenant, "--from", middle.isoformat(),
        "--to", datetime.now(UTC).isoformat(), "--json",
    )  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    diffs = json.loads(changed.stdout)
    kinds = {d["memory_id"]: d["change"] for d in diffs}
    # What a diff shows with content, it shows with the provenance of the write it shows.
    with_content = [d for d in diffs if d["content"] is not None]
    assert with_content and all(d["provenance"]["offset"] >= 0 for d in with_content)
    assert kinds["vpn-site"] == "changed" and kinds[kept_then] == "forgotten"
    assert "added" in kinds.values()

    unknown = memstream(env, "history", "--tenant", tenant, "never-had-this")
    assert unknown.returncode != 0 and "never held" in unknown.stderr


def test_a_kept_log_reads_only_what_came_after_it_and_all_of_it_again_after_an_erasure(
    stack: TestStack, settings: Settings
) -> None:
    tenant = f"kept-{uuid.uuid4().hex[:6]}"
    with Deployment(settings) as deployment:

        def publish_sealed(events: Sequence[MemoryEvent]) -> None:
            async def send() -> None:
                async with deployment.event_publisher() as publisher:
                    await publisher.publish(events)

            asyncio.run(send())
            stack.wait_applied(events)

        first = [stack.turn(tenant, f"first {n}", "ok", turn=n) for n in range(3)]
        publish_sealed(first)

        async def nothing_stored(tenant: str, memories: Sequence[Memory]) -> list[Vectors | None]:
            return [None] * len(memories)

        # The deployment's lineage, but reading what came since on every question (keep_s 0).
        lineage = Lineage(
            deployment.kafka, deployment.topics.memory, deployment.partition_of,
            deployment.embedder, nothing_stored, bounds=Bounds(settings.max_memories_per_tenant),
            tuning=deployment.recall_tuning(), default_importance=settings.default_importance,
            keyring=deployment.keyring(), keep_s=0,
        )  # fmt: skip
        read = lineage.log(tenant)
        assert len(read.events) == 3
        forgotten = memories_of(first[0])[0].id
        later: list[MemoryEvent] = [
            fact(stack, tenant, "The VPN gateway is in Dublin."),
            MemoryForgotten(tenant, uuid.uuid4().hex, datetime.now(UTC), memory_ids=(forgotten,)),
            stack.turn(tenant, "later", "ok", turn=9),
        ]
        publish_sealed(later)
        grown = lineage.log(tenant)
        assert grown.events[0] is read.events[0] and len(grown.events) == 6  # read on, not again
        now = datetime.now(UTC)
        fresh = Deployment(settings).lineage()
        assert lineage.view(tenant, now) == fresh.view(tenant, now)  # provenance included
        live = deployment.reader().memories(tenant)
        assert {(m.id, m.content) for m in lineage.view(tenant, now)} == {
            (m.id, m.content) for m in live
        }
        assert forgotten not in {m.id for m in lineage.view(tenant, now)}

        erase_tenant(deployment, tenant)
        erased = lineage.log(tenant)
        # Read again from the start: what was sealed under the destroyed key is gone (kept
        # and read on, the log would still hold the turns and the save).
        assert {type(e.event) for e in erased.events} == {MemoryForgotten, TenantErased}
        assert lineage.view(tenant, now) == []
        with pytest.raises(MemoryNotFoundError):
            lineage.history(tenant, "vpn-site")
