"""SemanticMemoryMiddleware over the in-process store: the seed's sentences that need no Kafka."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from memstream.agent import (
    Agent,
    Guardrails,
    RunConfig,
    ScriptedModel,
)
from memstream.agent.guardrails import Rule
from memstream.errors import (
    ConfigurationError,
    EffectRefusedError,
    InfrastructureError,
    KafkaUnavailableError,
    RedisUnavailableError,
)
from memstream.hooks import RecallConfig, RecordConfig, SemanticMemoryMiddleware, TurnRecorder
from memstream.memory.inprocess import InProcessMemoryStore

from ...doubles import CollectingMonitor, Crash, CrashAfterMemory, FixedClock
from .fakes import WordEmbedder

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Stores:
    """A resolver that counts how often it is asked, per tenant."""

    def __init__(self, fail_first: int = 0) -> None:
        self.asked: list[str] = []
        self.stores: dict[str, InProcessMemoryStore] = {}
        self.fail_first = fail_first

    def __call__(self, tenant: str) -> InProcessMemoryStore | None:
        self.asked.append(tenant)
        if len(self.asked) <= self.fail_first:
            raise ConnectionError("store backend not reachable yet")
        if tenant == "no-memory":
            return None
        return self.stores.setdefault(tenant, InProcessMemoryStore(tenant, WordEmbedder()))


def memory(
    stores: Stores, monitor: CollectingMonitor | None = None, **kw: object
) -> SemanticMemoryMiddleware:
    return SemanticMemoryMiddleware(
        stores=stores,
        client=ScriptedModel([]),
        recall=RecallConfig(max_recall_tokens=kw.pop("tokens", 100)),  # type: ignore[arg-type]
        record=RecordConfig(max_record_chars=kw.pop("chars", 200)),  # type: ignore[arg-type]
        clock=FixedClock(NOW),
        monitor=monitor or CollectingMonitor(),
        **kw,  # type: ignore[arg-type]
    )


def cfg(thread: str, tenant: str | None = "acme") -> RunConfig:
    return RunConfig(thread_id=thread, tenant_id=tenant)


def test_a_fact_of_one_thread_is_shown_in_another_thread_of_the_tenant_only() -> None:
    stores = Stores()
    model = ScriptedModel(["Noted.", "Your dog is Rex.", "I don't know."])
    agent = Agent(model, middleware=[memory(stores)])

    agent.run("My dog is called Rex", cfg("thread-1"))
    agent.run("What is my dog called?", cfg("thread-2"))
    agent.run("What is my dog called?", cfg("thread-1", tenant="globex"))

    first, second, other = model.requests
    assert first.sections == ()  # nothing recalled yet
    (section,) = second.sections
    assert section.title == "semantic-memory"
    assert "My dog is called Rex" in section.content
    assert "## semantic-memory" in second.system_prompt()
    assert other.sections == ()  # another tenant recalls nothing of acme's


def test_the_recalled_text_is_cut_to_max_recall_tokens_times_four_and_kept_under_the_key() -> None:
    stores = Stores()
    model = ScriptedModel(["ok", "ok"])
    agent = Agent(model, middleware=[memory(stores, tokens=10, chars=500)])
    agent.run("remember " + "word " * 80, cfg("t1"))
    agent.run("remember word", cfg("t2"))
    recalled = agent.thread("t2").state[SemanticMemoryMiddleware.RecalledKey]
    assert 0 < len(recalled) <= 40
    assert model.requests[1].sections[0].content == recalled


def test_every_model_step_of_the_turn_shows_the_section() -> None:
    from memstream.agent import Tool, ToolSpec

    from ..agent.conftest import calls

    stores = Stores()
    model = ScriptedModel(["Noted.", calls(("noop", {})), "done"])
    agent = Agent(
        model, middleware=[memory(stores)], tools=[Tool(ToolSpec("noop", "n"), lambda: "x")]
    )
    agent.run("My cat is Tom", cfg("t1"))
    agent.run("my cat?", cfg("t2"))
    assert all("My cat is Tom" in r.sections[0].content for r in model.requests[1:])


def test_each_memory_is_cut_to_max_record_chars() -> None:
    stores = Stores()
    agent = Agent(ScriptedModel(["a" * 50]), middleware=[memory(stores, chars=10)])
    agent.run("q" * 30, cfg("t1"))
    contents = sorted(m.content for m in stores.stores["acme"].memories())
    assert contents == ["a" * 10, "q" * 10]


def test_the_store_is_asked_once_per_tenant_and_shared_by_its_threads() -> None:
    stores = Stores()
    agent = Agent(ScriptedModel(["a", "b", "c"]), middleware=[memory(stores)])
    for thread in ("t1", "t2", "t3"):
        agent.run("hello there friend", cfg(thread))
    assert stores.asked == ["acme"]
    assert len(stores.stores["acme"].memories()) == 6


def test_a_failed_resolution_refuses_the_input_and_is_asked_again_next_turn() -> None:
    stores = Stores(fail_first=1)
    model = ScriptedModel(["answered"])
    agent = Agent(model, middleware=[memory(stores)])

    refused = agent.run("hi there you", cfg("t1"))
    assert refused.status == "blocked"
    assert "memory store of tenant 'acme' could not be resolved" in refused.reason
    assert model.requests == []  # refused before any model call

    assert agent.run("hi there you", cfg("t1")).status == "completed"
    assert stores.asked == ["acme", "acme"]


def test_no_two_tenants_may_share_a_store_instance() -> None:
    shared = InProcessMemoryStore("acme", WordEmbedder())
    agent = Agent(ScriptedModel(["ok"]), middleware=[memory(lambda tenant: shared)])  # type: ignore[arg-type]
    assert agent.run("hi", cfg("t1")).status == "completed"
    refused = agent.run("hi", cfg("t1", tenant="globex"))
    assert refused.status == "blocked" and "scoped to 'acme'" in refused.reason


def test_a_run_without_tenant_or_store_has_no_memory() -> None:
    stores = Stores()
    agent = Agent(ScriptedModel(["a", "b"]), middleware=[memory(stores)])
    assert agent.run("hello", cfg("t1", tenant=None)).status == "completed"
    assert agent.run("hello", cfg("t1", tenant="no-memory")).status == "completed"
    assert stores.asked == ["no-memory"]


class Failing(InProcessMemoryStore):
    def search(self, query: str, *, k: int) -> list:  # type: ignore[type-arg]
        raise RedisUnavailableError("Redis at redis://x did not answer")


def test_a_failed_search_is_skipped_and_announced_and_the_turn_goes_on() -> None:
    monitor = CollectingMonitor()
    agent = Agent(
        ScriptedModel(["still here"]),
        middleware=[memory(lambda t: Failing(t, WordEmbedder()), monitor)],  # type: ignore[arg-type]
    )
    result = agent.run("what do you remember?", cfg("t1"))
    assert (result.status, result.answer) == ("completed", "still here")
    (skipped,) = monitor.events
    assert (skipped.stage, skipped.code, skipped.tenant) == ("recall", "redis_unavailable", "acme")


class Unwritable(InProcessMemoryStore):
    def write(self, event, *, on_durable=None):  # type: ignore[no-untyped-def]
        raise InfrastructureError("the store is read-only today")


def test_a_failed_record_is_skipped_and_the_answer_stands() -> None:
    monitor = CollectingMonitor()
    agent = Agent(
        ScriptedModel(["the answer"]),
        middleware=[memory(lambda t: Unwritable(t, WordEmbedder()), monitor)],  # type: ignore[arg-type]
    )
    result = agent.run("question", cfg("t1"))
    assert (result.status, result.answer) == ("completed", "the answer")
    assert [e.stage for e in monitor.events] == ["record"]


def test_a_guardrail_block_records_nothing_when_memory_runs_outside_it() -> None:
    stores = Stores()
    guard = Guardrails(answers=[Rule.matching("password", "leaks a secret")])
    agent = Agent(
        ScriptedModel(["the password is hunter2"]),
        middleware=[guard, memory(stores, runs_before=frozenset({"guardrails"}))],
    )
    assert [m.id for m in agent.stack] == ["semantic-memory", "guardrails"]
    result = agent.run("what is the password?", cfg("t1"))
    assert result.status == "blocked"
    assert stores.stores["acme"].memories() == []


class CrashingWrites(InProcessMemoryStore):
    crash = True

    def write(self, event, *, on_durable=None):  # type: ignore[no-untyped-def]
        outcome = super().write(event, on_durable=on_durable)
        if self.crash:
            raise Crash("died after the write, before the journal knew")
        return outcome


def test_recovery_returns_the_recorded_outcome_and_never_writes_twice() -> None:
    stores = Stores()
    crasher = CrashAfterMemory()
    model = ScriptedModel(["Noted."])
    agent = Agent(model, middleware=[crasher, memory(stores)])
    with pytest.raises(Crash):
        agent.run("My dog is Rex", cfg("t1"), run_id="r1")
    crasher.armed = False

    assert agent.recover("r1").status == "completed"
    assert len(stores.stores["acme"].memories()) == 2
    assert len(model.requests) == 1


def test_a_replay_of_a_write_that_may_have_run_is_refused_on_a_non_transactional_store() -> None:
    store = CrashingWrites("acme", WordEmbedder())
    monitor = CollectingMonitor()
    agent = Agent(ScriptedModel(["Noted."]), middleware=[memory(lambda t: store, monitor)])  # type: ignore[arg-type]
    with pytest.raises(Crash):
        agent.run("My dog is Rex", cfg("t1"), run_id="r1")
    store.crash = False

    result = agent.recover("r1")

    assert (result.status, result.answer) == ("completed", "Noted.")  # the answer stands
    (skipped,) = monitor.events
    assert skipped.code == EffectRefusedError.code and skipped.stage == "record"
    assert len(store.memories()) == 2  # written once, by the crashed run


def test_with_store_runs_on_the_tenants_store() -> None:
    stores = Stores()
    middleware = memory(stores)
    Agent(ScriptedModel(["ok"]), middleware=[middleware]).run("hello there friend", cfg("t1"))
    count = middleware.with_store("acme", lambda store: len(store.memories()))  # type: ignore[union-attr]
    assert count == 2
    assert middleware.with_store("no-memory", lambda store: store) is None


def test_importance_is_decided_when_the_turn_is_recorded() -> None:
    stores = Stores()
    agent = Agent(ScriptedModel(["ok", "ok"]), middleware=[memory(stores)])
    agent.run("Please remember: my sister is called Ana", cfg("t1"))
    agent.run("ok thanks", cfg("t1"))
    by_content = {m.content: m.importance for m in stores.stores["acme"].memories()}
    assert by_content["Please remember: my sister is called Ana"] > by_content["ok thanks"]


def test_the_managers_model_calls_are_counted_in_the_threads_usage() -> None:
    from memstream.memory.manager import LLMMemoryManager, MemoryManagerConfig

    stores = Stores()
    scorer = ScriptedModel(["0.9"])  # the manager asks the model to score importance
    middleware = SemanticMemoryMiddleware(
        stores=stores,
        client=scorer,
        manager=lambda store, client: LLMMemoryManager(
            MemoryManagerConfig(importance="model"), store, client
        ),
        record=RecordConfig(),
        clock=FixedClock(NOW),
    )
    agent = Agent(ScriptedModel(["Noted."]), middleware=[middleware])
    result = agent.run("My sister is called Ana", cfg("t1"))
    assert result.usage.calls == 2  # the turn's call and the manager's
    assert len(scorer.requests) == 1
    assert {m.importance for m in stores.stores["acme"].memories()} == {0.9}


def test_the_recalled_key_belongs_only_to_agents_with_the_middleware() -> None:
    with_memory = Agent(ScriptedModel([]), middleware=[memory(Stores())])
    without = Agent(ScriptedModel([]), middleware=[Guardrails()])
    assert SemanticMemoryMiddleware.RecalledKey in with_memory.state_keys
    assert SemanticMemoryMiddleware.RecalledKey not in without.state_keys


def test_a_middleware_with_neither_recall_nor_record_is_refused_saying_what_to_give() -> None:
    with pytest.raises(ConfigurationError, match=r"recall=RecallConfig\(\).*record=RecordConfig"):
        SemanticMemoryMiddleware(stores=Stores(), client=ScriptedModel([]))


def test_with_a_recorder_the_turn_only_queues_its_record_and_with_store_waits_for_it() -> None:
    stores = Stores()
    recorder = TurnRecorder()
    held, release = threading.Event(), threading.Event()
    recorder.submit(lambda: (held.set(), release.wait(10)))  # the recorder is busy
    assert held.wait(10)
    agent = Agent(ScriptedModel(["Noted."]), middleware=[memory(stores, recorder=recorder)])

    result = agent.run("My dog is called Rex", cfg("thread-1"))

    assert (result.status, result.answer) == ("completed", "Noted.")
    assert stores.stores["acme"].memories() == []  # the turn ended before its record was written
    release.set()
    count = memory(stores, recorder=recorder).with_store(
        "acme",
        lambda store: len(store.memories()),  # type: ignore[union-attr]
    )
    assert count == 2
    recorder.close()


def test_a_recorder_that_cannot_keep_up_skips_the_turn_and_says_so() -> None:
    stores, monitor = Stores(), CollectingMonitor()
    recorder = TurnRecorder(capacity=1)
    held, release = threading.Event(), threading.Event()
    recorder.submit(lambda: (held.set(), release.wait(10)))
    assert held.wait(10)
    recorder.submit(lambda: None)  # full
    agent = Agent(
        ScriptedModel(["Noted."]), middleware=[memory(stores, monitor, recorder=recorder)]
    )

    result = agent.run("My dog is called Rex", cfg("thread-1"))

    assert (result.status, result.answer) == ("completed", "Noted.")  # the answer stands
    (skipped,) = monitor.events
    assert skipped.stage == "record" and skipped.code == KafkaUnavailableError.code
    assert "not keeping up" in skipped.reason
    release.set()
    assert recorder.close(timeout=10)
    assert stores.stores["acme"].memories() == []  # skipped, not written later
