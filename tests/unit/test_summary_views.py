"""Summary views: partitioning and prompts (memory.summaries), and the summary job
(streams.summaries) over the in-memory projection: runs, reuse of unchanged summaries, tasks,
and a request read again after a crash."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

from memstream.agent import ScriptedModel
from memstream.config import Settings
from memstream.inmemory.backend import InMemoryProjection
from memstream.memory.codec import encode_event
from memstream.memory.events import (
    TASKS,
    MemoryEvent,
    MemorySaved,
    PartitionSummarised,
    SummaryRunRequested,
    SummaryTaskChanged,
    SummaryViewDefined,
    results_of,
)
from memstream.memory.model import Memory, MemoryType
from memstream.memory.monitoring import MonitoringEvent
from memstream.memory.summaries import (
    WHOLE_VIEW,
    ViewSpec,
    covered,
    inputs_digest,
    partition_key,
    partitions,
    result_key,
    summary_request,
    unsummarised,
)
from memstream.providers import EmbedderCatalogue
from memstream.providers.minilm import MiniLMEmbedder
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import RawMessage
from memstream.streams.summaries import SummaryJob, SummaryOutlets, SummaryParts
from memstream.streams.topics import Topics
from memstream.testing.memory import aproject

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
FACETS = {"user_id": "meta:ams.user_id", "memory_type": "kind", "session_id": "thread"}


def memory(n: int, text: str, user: str | None, *, days: int = 1, thread: str = "s1") -> Memory:
    return Memory(
        id=f"m{n}",
        tenant="acme",
        content=text,
        memory_type=MemoryType.USER_FACT,
        thread=thread,
        timestamp=NOW - timedelta(days=days, minutes=n),
        importance=0.5,
        event_id=f"e{n}",
        metadata={"ams.user_id": user} if user else {},
    )


def test_a_group_key_sorts_and_encodes_its_labels_as_agent_memory_server_does() -> None:
    assert (
        partition_key({"user_id": "alice", "namespace": "a|b"}) == "namespace=a%7Cb|user_id=alice"
    )
    assert partition_key({}) == ""


def test_partitions_group_what_the_view_covers_and_skip_memories_without_a_value() -> None:
    spec = ViewSpec("v", ("user_id",), {"memory_type": "semantic"}, FACETS, window_days=7)
    memories = [
        memory(1, "Alice likes tea.", "alice"),
        memory(2, "Bob likes coffee.", "bob"),
        memory(3, "Alice moved to Lyon.", "alice"),
        memory(4, "Nobody's memory.", None),
        memory(5, "Alice, long ago.", "alice", days=30),  # outside the window
    ]
    made = partitions(spec, memories, NOW)
    assert [(p.key, [m.id for m in p.memories]) for p in made] == [
        ("user_id=alice", ["m3", "m1"]),  # oldest first
        ("user_id=bob", ["m2"]),
    ]
    other = ViewSpec("v", ("user_id",), {"memory_type": "message"}, FACETS)
    assert partitions(other, memories, NOW) == []  # a fact is no message
    one = covered(spec, memories, {"user_id": "bob"}, NOW)
    assert [m.id for m in one.memories] == ["m2"] and one.group == {"user_id": "bob"}


def test_the_prompt_says_the_instructions_group_and_memories_and_the_digest_follows_them() -> None:
    spec = ViewSpec("v", ("user_id",), facets=FACETS)
    (alice,) = partitions(spec, [memory(1, "Alice likes tea.", "alice")], NOW)
    text = summary_request(spec, alice).messages[0].content
    assert text.startswith("You are a summarization assistant.")
    assert 'GROUP: {"user_id": "alice"}' in text and "- Alice likes tea." in text
    assert text.endswith("SUMMARY:")
    custom = ViewSpec("v", ("user_id",), facets=FACETS, prompt="Be terse.")
    assert summary_request(custom, alice).messages[0].content.startswith("Be terse.")
    digest = inputs_digest(spec, alice, "tiny")
    assert inputs_digest(spec, alice, "tiny") == digest
    assert inputs_digest(custom, alice, "tiny") != digest
    assert inputs_digest(spec, alice, "other") != digest
    (edited,) = partitions(spec, [memory(1, "Alice likes green tea.", "alice")], NOW)
    assert inputs_digest(spec, edited, "tiny") != digest
    listed = unsummarised(alice)
    assert listed.startswith("LLM summarization disabled") and listed.endswith("- Alice likes tea.")


# -- the job, over the in-memory projection ---------------------------------------------------


class Monitor:
    def __init__(self) -> None:
        self.events: list[MonitoringEvent] = []

    def announce(self, event: MonitoringEvent) -> None:
        self.events.append(event)


class World:
    """An in-memory projection the job reads and writes back to, as the worker would."""

    def __init__(self, model: ScriptedModel | None, refresh_s: float = 0.0) -> None:
        settings = Settings.from_env({"MEMSTREAM_NAMESPACE": "summary-job"})
        self.projection = InMemoryProjection(settings, lambda tenant: 0)
        self.projection.drop()
        self.embedders = EmbedderCatalogue(settings, MiniLMEmbedder())
        self.model = model
        self.monitor = Monitor()
        self.offset = 0
        parts = SummaryParts(
            model,
            "tiny" if model else "",
            self.projection.reader(),
            self.projection.status(),
            refresh_s=refresh_s,
            partition_of=lambda tenant: 0,
        )
        outlets = SummaryOutlets(self.apply_one, self.monitor, None, "", 0.5)
        self.job = SummaryJob(KafkaConnection("127.0.0.1:1"), "ns.memory", "g", parts, outlets)

    async def apply_one(self, event: MemoryEvent) -> None:
        await self.aapply(event)

    async def aapply(self, *events: MemoryEvent) -> None:
        await aproject(
            self.projection,
            self.embedders,
            events,
            topics=Topics("summary-job", 1),
            partition_of=lambda tenant: 0,
        )

    def apply(self, *events: MemoryEvent) -> None:
        asyncio.run(self.aapply(*events))

    def run(self, request: SummaryRunRequested) -> list[MemoryEvent]:
        self.apply(request)
        self.offset += 1
        message = RawMessage("ns.memory", 0, self.offset, b"acme", encode_event(request), NOW)
        return asyncio.run(self.job.handle(message))

    def documents(self, collection: str) -> dict[str, dict[str, object]]:
        stored = self.projection.reader().documents("acme", collection)
        return {k: json.loads(v) for k, v in stored.items()}


def saved(n: int, text: str, user: str) -> MemorySaved:
    return MemorySaved(
        tenant="acme",
        memory_id=f"m{n}",
        thread="s1",
        content=text,
        memory_type=MemoryType.USER_FACT,
        role="",
        saved_at=NOW - timedelta(minutes=10 - n),
        importance=0.5,
        embedding_model="",
        metadata={"ams.user_id": user},
    )


VIEW = SummaryViewDefined(
    "acme", "v1", "long_term", NOW, group_by=("user_id",), facets={"user_id": "meta:ams.user_id"}
)


def run(task: str, *, force: bool = False, minutes: int = 0) -> SummaryRunRequested:
    return SummaryRunRequested("acme", task, "v1", NOW + timedelta(minutes=minutes), force=force)


def test_a_run_summarises_each_partition_once_and_its_task_ends_in_success() -> None:
    world = World(ScriptedModel(["Alice likes tea and lives in Lyon.", "Bob likes coffee."]))
    world.apply(VIEW, saved(1, "Alice likes tea.", "alice"), saved(2, "Alice lives in Lyon.",
                "alice"), saved(3, "Bob likes coffee.", "bob"))  # fmt: skip
    written = world.run(run("task-1"))
    statuses = [e.status for e in written if isinstance(e, SummaryTaskChanged)]
    assert statuses == ["running", "success"]
    results = world.documents(results_of("v1"))
    assert {k: (r["summary"], r["memory_count"]) for k, r in results.items()} == {
        "user_id=alice": ("Alice likes tea and lives in Lyon.", 2),
        "user_id=bob": ("Bob likes coffee.", 1),
    }
    task = world.documents(TASKS)["task-1"]
    assert task["status"] == "success" and task["started_at"] and task["completed_at"]
    assert len(world.monitor.events) == 2  # each model call's usage announced

    # Read again (a crash before the commit): the task finished, nothing is written again.
    again = RawMessage("ns.memory", 0, 99, b"acme", encode_event(run("task-1")), NOW)
    assert asyncio.run(world.job.handle(again)) == []

    # A second run with nothing changed asks no model: the stored summaries are kept.
    assert world.model is not None
    before = len(world.model.requests)
    world.run(run("task-2", minutes=1))
    assert len(world.model.requests) == before
    assert world.documents(results_of("v1"))["user_id=bob"]["summary"] == "Bob likes coffee."
    # A forced run asks again (the script is spent: that partition says it failed, and is
    # asked again next time).
    world.run(run("task-3", force=True, minutes=2))
    assert len(world.model.requests) == before + 2
    stored = world.documents(results_of("v1"))["user_id=bob"]
    assert stored["summary"] == "No summary could be generated for this partition."
    assert stored["inputs"] == ""


def test_one_partition_runs_alone_and_without_a_model_the_summary_says_so() -> None:
    world = World(None)
    world.apply(VIEW, saved(1, "Alice likes tea.", "alice"), saved(3, "Bob likes coffee.", "bob"))
    request = SummaryRunRequested("acme", "r1", "v1", NOW, whole=False, group={"user_id": "bob"})
    (result,) = world.run(request)
    assert isinstance(result, PartitionSummarised) and result.id == request.result_id(result.group)
    assert result.summary.startswith("LLM summarization disabled")
    assert "- Bob likes coffee." in result.summary and "Alice" not in result.summary
    assert world.documents(TASKS) == {}  # one partition has no task
    nobody = SummaryRunRequested("acme", "r2", "v1", NOW, whole=False, group={"user_id": "carol"})
    (empty,) = world.run(nobody)
    assert isinstance(empty, PartitionSummarised) and empty.memory_count == 0
    assert empty.summary == "No memories found for group {'user_id': 'carol'}."


def test_a_view_without_groups_is_one_partition_stored_under_its_own_key() -> None:
    # Its group is empty, and so is the group's key; a result stored under "" named the whole
    # collection, which failed the projection's apply and stopped the worker (found by `bench
    # chaos`). The result has a key of its own, and the view's ids are unchanged.
    world = World(None)
    whole = SummaryViewDefined("acme", "v1", "long_term", NOW)
    world.apply(whole, saved(1, "Alice likes tea.", "alice"), saved(3, "Bob likes coffee.", "bob"))
    written = world.run(run("task-1"))
    assert [e.group for e in written if isinstance(e, PartitionSummarised)] == [{}]
    assert {k: r["memory_count"] for k, r in world.documents(results_of("v1")).items()} == {
        WHOLE_VIEW: 2
    }
    assert world.documents(TASKS)["task-1"]["status"] == "success"
    one = SummaryRunRequested("acme", "r1", "v1", NOW, whole=False, group={})
    (result,) = world.run(one)
    assert isinstance(result, PartitionSummarised) and result.id == one.result_id({})
    assert "- Bob likes coffee." in result.summary
    assert result_key({}) == WHOLE_VIEW and result_key({"user_id": "bob"}) == "user_id=bob"


def test_a_run_of_a_view_that_is_gone_fails_its_task_saying_so() -> None:
    world = World(None)
    world.run(run("task-1"))
    task = world.documents(TASKS)["task-1"]
    assert task["status"] == "failed" and task["error_message"] == "SummaryView v1 not found"


def test_continuous_views_run_again_once_a_period_by_the_holder_of_the_tenant() -> None:
    world = World(None, refresh_s=3600)
    kept = SummaryViewDefined(
        "acme", "v2", "long_term", NOW, group_by=("user_id",), continuous=True,
        facets={"user_id": "meta:ams.user_id"},
    )  # fmt: skip
    world.apply(VIEW, kept, saved(1, "Alice likes tea.", "alice"))

    def refresh(held: set[int], at: datetime) -> list[SummaryRunRequested]:
        asked = asyncio.run(world.job.refresh(held, at))
        world.apply(*asked)
        return asked

    assert refresh({1}, NOW) == []  # another worker holds the tenant's partition
    (asked,) = refresh({0}, NOW)
    assert asked.view_id == "v2" and asked.whole and not asked.tracked  # not the other view
    assert refresh({0}, NOW + timedelta(minutes=30)) == []  # asked already this period
    (later,) = refresh({0}, NOW + timedelta(hours=1))
    assert later.id != asked.id
    # A second worker asking for the same period asks for the same run: one event.
    message = RawMessage("ns.memory", 0, 50, b"acme", encode_event(asked), NOW)
    (result,) = asyncio.run(world.job.handle(message))
    assert isinstance(result, PartitionSummarised) and result.memory_count == 1
    assert world.documents(TASKS) == {}  # a refresh keeps no task
