"""Lineage on the real stack: a tenant's memory as of a moment equals a real rebuild of its
log truncated there (less what was forgotten since), and history and diff tell what happened."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from datetime import UTC, datetime

import pytest

from memstream import Settings
from memstream.deployment import Deployment
from memstream.memory.events import MemoryEvent, MemoryForgotten, MemorySaved, memories_of
from memstream.memory.model import Memory, MemoryType
from memstream.operations import drop
from memstream.streams.topics import ensure_topics

from .helpers import TestStack
from .test_cli import memstream
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
    kinds = {d["memory_id"]: d["change"] for d in json.loads(changed.stdout)}
    assert kinds["vpn-site"] == "changed" and kinds[kept_then] == "forgotten"
    assert "added" in kinds.values()

    unknown = memstream(env, "history", "--tenant", tenant, "never-had-this")
    assert unknown.returncode != 0 and "never held" in unknown.stderr
