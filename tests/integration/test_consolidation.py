"""Consolidation end to end: turns ask for it, the worker's job summarises once, the
projection replaces the group, and the model calls are announced as usage."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.deployment import Deployment
from memstream.eventsourced import EventSourcedStores
from memstream.hooks import ConsolidateConfig, RecordConfig, SemanticMemoryMiddleware
from memstream.memory.monitoring import ModelUsage

from .commands import memstream
from .helpers import TestStack, wait_until

pytestmark = pytest.mark.integration


class HourlyClock:
    """Each reading is an hour after the last: every turn is older than the next one's."""

    def __init__(self) -> None:
        self._now = datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        self._now += timedelta(hours=1)
        return self._now


@pytest.fixture
def stores(stack: TestStack) -> Iterator[EventSourcedStores]:
    with Deployment(stack.settings) as deployment:
        yield deployment.stores()


def test_old_memories_are_replaced_by_one_summary_decided_once(
    stack: TestStack, stores: EventSourcedStores
) -> None:
    tenant = f"cons-{uuid.uuid4().hex[:8]}"
    consolidated_agent(stores, tenant)

    # The last request's cutoff covers the first two turns: four memories, one group.
    def summarised() -> bool:
        return {m.role for m in stores(tenant).memories()} == {"summary", "user", "assistant"}

    wait_until(summarised, "the summary to replace the first two turns")
    memories = stores(tenant).memories()
    (summary,) = [m for m in memories if m.role == "summary"]
    # The extractive summariser keeps each statement once (a turn's two share a timestamp,
    # so their order is the ids').
    assert set(summary.content.split("; ")) == {
        "I live in Lisbon.",
        "Noted.",
        "I have two cats.",
        "Got it.",
    }
    assert summary.thread == "kitchen"
    assert {m.content for m in memories if m.role != "summary"} == {"What do you know?", "Sure."}

    usage = stack.read_topic(
        stack.topics.monitoring,
        lambda rs: any(r.key == tenant.encode() and b'"Usage"' in r.value for r in rs),
    )
    (notice,) = [
        json.loads(r.value) for r in usage if r.key == tenant.encode() and b'"Usage"' in r.value
    ]
    assert notice["type"] == ModelUsage.type and notice["purpose"] == "consolidation"
    assert (notice["thread"], notice["calls"]) == ("kitchen", 1)


def usage_notices(stack: TestStack, tenant: str, until: int) -> list[dict[str, object]]:
    """The Usage notices of `tenant` on the monitoring topic, read until there are `until`."""
    key = tenant.encode()

    def usage(records: list[object]) -> list[dict[str, object]]:
        found = [json.loads(r.value) for r in records if r.key == key]  # type: ignore[attr-defined]
        return [n for n in found if n["type"] == ModelUsage.type]

    records = stack.read_topic(stack.topics.monitoring, lambda rs: len(usage(rs)) >= until)
    return usage(records)


def consolidated_agent(stores: EventSourcedStores, tenant: str) -> None:
    middleware = SemanticMemoryMiddleware(
        stores=stores,
        client=ScriptedModel([]),
        record=RecordConfig(),
        consolidate=ConsolidateConfig(older_than=timedelta(minutes=90), min_count=3),
        clock=HourlyClock(),
        monitor=stores.monitor,
    )
    agent = Agent(ScriptedModel(["Noted.", "Got it.", "Sure."]), middleware=[middleware])
    for text in ("I live in Lisbon.", "I have two cats.", "What do you know?"):
        assert agent.run(text, RunConfig("kitchen", tenant)).status == "completed"
    assert stores.publisher.flush(30)


def test_a_replay_keeps_the_summary_and_calls_no_model(
    stack: TestStack, stores: EventSourcedStores, env: dict[str, str]
) -> None:
    tenant = f"cons-replay-{uuid.uuid4().hex[:8]}"
    consolidated_agent(stores, tenant)
    (before,) = usage_notices(stack, tenant, until=1)

    def summaries() -> list[str]:
        return [m.content for m in stores(tenant).memories() if m.role == "summary"]

    wait_until(lambda: len(summaries()) == 1, "the summary to be projected")
    summary = summaries()

    replayed = memstream(env, "replay", "--allow-dead-letters")
    assert replayed.returncode == 0, replayed.stderr
    assert summaries() == summary  # carried in its event: the rebuild needs no model

    # A barrier: a later tenant's consolidation is announced, so anything the replay had set
    # off for the first tenant would have been announced before it.
    later = f"cons-barrier-{uuid.uuid4().hex[:8]}"
    consolidated_agent(stores, later)
    usage_notices(stack, later, until=1)
    assert usage_notices(stack, tenant, until=1) == [before]
