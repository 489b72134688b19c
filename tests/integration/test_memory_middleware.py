"""SemanticMemoryMiddleware on the event-sourced store: Kafka, the worker and Redis, for real."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from memstream import Settings
from memstream.agent import (
    Agent,
    Guardrails,
    RunConfig,
    ScriptedModel,
)
from memstream.agent.guardrails import Rule
from memstream.deployment import Deployment
from memstream.errors import RedisLoadingError
from memstream.eventsourced import EventSourcedStores
from memstream.hooks import RecallConfig, RecordConfig, SemanticMemoryMiddleware
from memstream.memory.monitoring import Skipped
from memstream.streams.background_publisher import BackgroundPublisher
from memstream.streams.kafka import KafkaConnection

from ..doubles import CollectingMonitor, Crash, CrashAfterMemory
from .helpers import OwnRedis, TestStack, shared_embedder, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def stores(stack: TestStack) -> Iterator[EventSourcedStores]:
    with Deployment(stack.settings) as deployment:
        yield deployment.stores()


def memory(stores: EventSourcedStores, **kw: object) -> SemanticMemoryMiddleware:
    return SemanticMemoryMiddleware(
        stores=stores,
        client=ScriptedModel([]),
        recall=RecallConfig(),
        record=RecordConfig(),
        monitor=stores.monitor,
        **kw,  # type: ignore[arg-type]
    )


def tenant() -> str:
    return f"acme-{uuid.uuid4().hex[:8]}"


def recorded(stack: TestStack, stores: EventSourcedStores, tenant_id: str, count: int) -> None:
    """Wait until `count` memories of the tenant are in the projection."""
    assert stores.publisher.flush(30)
    wait_until(
        lambda: stack.stored_memories(tenant_id) == count, f"{count} memories of {tenant_id}"
    )


def test_a_fact_told_in_one_thread_is_in_the_prompt_of_another_never_another_tenants(
    stack: TestStack, stores: EventSourcedStores
) -> None:
    acme, globex = tenant(), tenant()
    model = ScriptedModel(["Noted.", "Your dog is Rex.", "I don't know."])
    agent = Agent(model, middleware=[memory(stores)])

    agent.run("My dog is called Rex.", RunConfig("thread-1", acme))
    recorded(stack, stores, acme, 2)
    agent.run("What is my dog called?", RunConfig("thread-2", acme))
    agent.run("What is my dog called?", RunConfig("thread-1", globex))

    _, second, other = model.requests
    assert "## semantic-memory" in second.system_prompt()
    assert "My dog is called Rex." in second.sections[0].content
    assert all("Rex" not in s.content for s in other.sections)


def test_a_guardrail_block_records_nothing(stack: TestStack, stores: EventSourcedStores) -> None:
    acme = tenant()
    guard = Guardrails(answers=[Rule.matching("hunter2", "leaks a secret")])
    agent = Agent(
        ScriptedModel(["the password is hunter2", "Noted."]),
        middleware=[guard, memory(stores, runs_before=frozenset({"guardrails"}))],
    )
    assert agent.run("what is the password?", RunConfig("t1", acme)).status == "blocked"
    assert agent.run("I like tea.", RunConfig("t1", acme)).status == "completed"
    # Per-tenant order: once the second turn is projected, the first would have been too.
    recorded(stack, stores, acme, 2)
    contents = {h.memory.content for h in stack.recaller().recall(acme, "password", k=10)}
    assert contents == {"I like tea.", "Noted."}


def test_a_crash_after_sending_is_recovered_without_a_second_copy_in_the_projection(
    stack: TestStack, stores: EventSourcedStores
) -> None:
    acme = tenant()
    crasher = CrashAfterMemory()
    model = ScriptedModel(["Noted."])
    agent = Agent(model, middleware=[crasher, memory(stores)])
    with pytest.raises(Crash):
        agent.run("My sister is Ana.", RunConfig("t1", acme), run_id=f"run-{acme}")
    recorded(stack, stores, acme, 2)
    crasher.armed = False
    before = stack.end_offsets(stack.topics.memory)

    result = agent.recover(f"run-{acme}")

    assert (result.status, result.answer) == ("completed", "Noted.")
    assert len(model.requests) == 1
    assert stores.publisher.flush(30)
    # The effect was journaled as applied once durable: recovery sent nothing again.
    assert stack.end_offsets(stack.topics.memory) == before
    assert stack.stored_memories(acme) == 2


class ForgetfulJournal:
    """Loses `memory.record`'s applied record, as a process dying between the broker's
    acknowledgement and the journal write would."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def effect_applied(self, run_id: str, name: str, key: str, outcome: object) -> None:
        if name != "memory.record":
            self.inner.effect_applied(run_id, name, key, outcome)  # type: ignore[attr-defined]


def test_an_event_sent_but_not_journaled_is_sent_again_and_applied_once(
    stack: TestStack, stores: EventSourcedStores
) -> None:
    from memstream.agent import InMemoryJournal

    acme = tenant()
    journal = InMemoryJournal()
    crasher = CrashAfterMemory()
    model = ScriptedModel(["Noted."])
    crashing = Agent(model, middleware=[crasher, memory(stores)], journal=ForgetfulJournal(journal))  # type: ignore[arg-type]
    with pytest.raises(Crash):
        crashing.run("My brother is Tom.", RunConfig("t1", acme), run_id=f"run-{acme}")
    recorded(stack, stores, acme, 2)
    before = sum(stack.end_offsets(stack.topics.memory).values())

    crasher.armed = False
    restarted = Agent(model, middleware=[crasher, memory(stores)], journal=journal)
    result = restarted.recover(f"run-{acme}")

    assert result.status == "completed" and len(model.requests) == 1
    assert stores.publisher.flush(30)
    assert sum(stack.end_offsets(stack.topics.memory).values()) == before + 1  # sent again
    marker = stack.turn(acme, "marker", "after the replayed copy")
    stack.publish([marker])
    stack.wait_applied([marker])
    assert stack.stored_memories(acme) == 4  # the turn's two, once, and the marker's two


def test_redis_down_during_recall_still_answers_and_announces_skipped(stack: TestStack) -> None:
    acme = tenant()
    down = dataclasses.replace(stack.settings, redis_url="redis://127.0.0.1:1/0")
    stores = Deployment(down).stores()
    try:
        agent = Agent(ScriptedModel(["answered anyway"]), middleware=[memory(stores)])
        result = agent.run("anything to recall?", RunConfig("t1", acme), run_id=f"run-{acme}")
        assert (result.status, result.answer) == ("completed", "answered anyway")
        assert stores.publisher.flush(30)
    finally:
        stores.close()

    records = stack.read_topic(
        stack.topics.monitoring, lambda rs: any(r.key == acme.encode() for r in rs)
    )
    (notice,) = [json.loads(r.value) for r in records if r.key == acme.encode()]
    assert notice["type"] == Skipped.type and notice["stage"] == "recall"
    assert notice["code"] == "redis_unavailable" and notice["run_id"] == f"run-{acme}"


def _loading(server: OwnRedis) -> bool:
    try:
        server.client().ping()
    except redis.BusyLoadingError:
        return True
    except redis.ConnectionError:  # not listening yet
        return False
    return False


def test_while_redis_is_loading_recall_fails_at_once_and_the_hook_skips(
    stack: TestStack, tmp_path: Path
) -> None:
    acme = tenant()
    server = OwnRedis(tmp_path)
    data = tmp_path / "data"
    with server.running(data, "--enable-debug-command", "yes"):
        server.client().execute_command("DEBUG", "POPULATE", 200_000)
        server.client().save()
    # Loading 200k keys at 25 us each keeps Redis answering LOADING for 5 s or more; it
    # answers clients between every 1 KiB it loads, as it does between every 2 MiB by default.
    slow = ("--key-load-delay", "25", "--loading-process-events-interval-bytes", "1024")
    server.start(data, *slow)
    try:
        wait_until(lambda: _loading(server), "the test's Redis to answer LOADING")
        loading = dataclasses.replace(stack.settings, redis_url=server.url)
        embedder = shared_embedder(stack.settings)  # loaded before the clock starts
        with Deployment(loading, embedder=embedder) as deployment:
            started = time.monotonic()
            with pytest.raises(RedisLoadingError) as raised:
                deployment.recaller().recall(acme, "anything?")
            assert time.monotonic() - started < 1.0  # at once, not after a timeout
            assert raised.value.retryable and raised.value.code == "redis_loading"

            stores = deployment.stores()
            agent = Agent(ScriptedModel(["answered anyway"]), middleware=[memory(stores)])
            started = time.monotonic()
            result = agent.run("anything to recall?", RunConfig("t1", acme), run_id=f"r-{acme}")
            took = time.monotonic() - started
            assert (result.status, result.answer) == ("completed", "answered anyway")
            assert took < 1.0, took
            assert stores.publisher.flush(30)
        assert _loading(server)  # all of it happened while Redis was loading
    finally:
        server.stop()

    records = stack.read_topic(
        stack.topics.monitoring, lambda rs: any(r.key == acme.encode() for r in rs)
    )
    (notice,) = [json.loads(r.value) for r in records if r.key == acme.encode()]
    assert notice["type"] == Skipped.type and notice["stage"] == "recall"
    assert notice["code"] == "redis_loading" and notice["run_id"] == f"r-{acme}"


def test_while_kafka_is_down_turns_wait_in_a_bounded_buffer_then_are_skipped(
    settings: Settings,
) -> None:
    down = dataclasses.replace(settings, kafka_bootstrap="127.0.0.1:1")
    publisher = BackgroundPublisher(KafkaConnection.from_settings(down), capacity=2)
    stores = Deployment(down).stores(publisher=publisher)
    monitor = CollectingMonitor()
    try:
        agent = Agent(
            ScriptedModel(["one", "two", "three"]),
            middleware=[
                SemanticMemoryMiddleware(
                    stores=stores, client=ScriptedModel([]), record=RecordConfig(), monitor=monitor
                )
            ],
        )
        answers = [agent.run(q, RunConfig("t1", "acme")).answer for q in ("a", "b", "c")]
        assert answers == ["one", "two", "three"]  # every answer stands
        assert publisher.pending == 2  # the first two turns wait for Kafka
        assert [e.stage for e in monitor.events] == ["record"]  # the third was skipped
        assert monitor.events[0].code == "kafka_unavailable"
        assert "buffer (2 messages) is full" in monitor.events[0].reason
    finally:
        publisher.close(timeout=0.5)
