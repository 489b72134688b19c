"""MemstreamMiddleware in LangChain v1 agents (`create_agent`), on the real stack.

The model is LangChain's fake chat model, recording every request it gets, so the tests see
exactly the system message memory gave it: a fact told in one thread reaches the model in
another thread of the same tenant, never in another tenant's, through `invoke` and `ainvoke`.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from memstream.deployment import Deployment
from memstream.errors import InvalidTenantError
from memstream.hooks.turns import RecallConfig
from memstream.integrations.langchain import MemstreamMiddleware
from memstream.streams.background_publisher import BackgroundPublisher
from memstream.streams.kafka import KafkaConnection
from memstream.streams.monitor import KafkaMonitor
from memstream.streams.wire import Record

from .helpers import TestStack, wait_until

pytestmark = pytest.mark.integration


class RecordingChat(GenericFakeChatModel):
    """Answers from a script and keeps every list of messages it was asked with."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingChat:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def system_text(self, call: int = -1) -> str:
        system = self.seen[call][0]
        assert isinstance(system, SystemMessage)
        return system.text


@dataclass(frozen=True)
class Context:
    user_id: str | None


def answers() -> Iterator[AIMessage]:
    return (AIMessage(content=f"Noted ({n}).") for n in itertools.count())


@pytest.fixture
def middleware(stack: TestStack) -> Iterator[MemstreamMiddleware]:
    middleware = MemstreamMiddleware(Deployment(stack.settings))
    yield middleware
    middleware.close()


def agent_with(middleware: MemstreamMiddleware, model: RecordingChat) -> Any:
    return create_agent(
        model,
        system_prompt="You are a terse assistant.",
        middleware=[middleware],
        context_schema=Context,
        checkpointer=InMemorySaver(),
    )


def ask(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def recallable(stack: TestStack, tenant: str, text: str) -> bool:
    return any(text in h.memory.content for h in stack.recaller().recall(tenant, text, k=10))


def test_a_fact_reaches_another_thread_of_the_tenant_only(
    stack: TestStack, middleware: MemstreamMiddleware
) -> None:
    acme, globex = f"lc-acme-{uuid.uuid4().hex[:6]}", f"lc-globex-{uuid.uuid4().hex[:6]}"
    model = RecordingChat(messages=answers())
    agent = agent_with(middleware, model)
    told = agent.invoke(
        {"messages": [{"role": "user", "content": "My favourite colour is teal."}]},
        config=ask("monday"),
        context=Context(acme),
    )
    assert (
        told["messages"][-1].text == "Noted (0)."
    )  # the answer stands; recording waits for nothing
    wait_until(lambda: recallable(stack, acme, "teal"), "the turn to be recorded and projected")

    agent.invoke(
        {"messages": [{"role": "user", "content": "What is my favourite colour?"}]},
        config=ask("friday"),
        context=Context(acme),
    )
    system = model.system_text()
    assert system.startswith("You are a terse assistant.")  # the existing blocks are kept
    assert f"## {MemstreamMiddleware.SECTION}" in system and "teal" in system
    assert model.seen[-1][-1].text == "What is my favourite colour?"

    agent.invoke(
        {"messages": [{"role": "user", "content": "What is my favourite colour?"}]},
        config=ask("friday"),
        context=Context(globex),
    )
    assert "teal" not in model.system_text()
    assert model.system_text() == "You are a terse assistant."

    # No tenant in the context: a run without memory, and nothing is recorded.
    agent.invoke(
        {"messages": [{"role": "user", "content": "My favourite colour is teal."}]},
        config=ask("anon"),
        context=Context(None),
    )
    assert model.system_text() == "You are a terse assistant."


async def test_ainvoke_recalls_and_records(
    stack: TestStack, middleware: MemstreamMiddleware
) -> None:
    tenant = f"lc-async-{uuid.uuid4().hex[:6]}"
    model = RecordingChat(messages=answers())
    agent = agent_with(middleware, model)
    await agent.ainvoke(
        {"messages": [{"role": "user", "content": "I keep bees in Ljubljana."}]},
        config=ask("a1"),
        context=Context(tenant),
    )
    wait_until(lambda: recallable(stack, tenant, "Ljubljana"), "the async turn to be recorded")
    await agent.ainvoke(
        {"messages": [{"role": "user", "content": "Where do I keep my bees?"}]},
        config=ask("a2"),
        context=Context(tenant),
    )
    assert "Ljubljana" in model.system_text()


def test_recall_is_cut_to_its_budget(stack: TestStack) -> None:
    tenant = f"lc-budget-{uuid.uuid4().hex[:6]}"
    middleware = MemstreamMiddleware(
        Deployment(stack.settings), recall=RecallConfig(max_recall_tokens=10)
    )
    model = RecordingChat(messages=answers())
    agent = agent_with(middleware, model)
    fact = "My grandmother's village is Hallstatt, on the lake, " * 4
    agent.invoke(
        {"messages": [{"role": "user", "content": fact}]}, config=ask("b1"), context=Context(tenant)
    )
    wait_until(lambda: recallable(stack, tenant, "Hallstatt"), "the turn to be recorded")
    agent.invoke(
        {"messages": [{"role": "user", "content": "Where is grandmother's village Hallstatt?"}]},
        config=ask("b2"),
        context=Context(tenant),
    )
    section = model.system_text().split(f"## {MemstreamMiddleware.SECTION}\n", 1)[1]
    assert 0 < len(section) <= 10 * 4
    middleware.close()


def test_a_failed_record_is_skipped_and_announced_never_raised(stack: TestStack) -> None:
    """Kafka for memory writes is unreachable and its buffer full: the answer stands, and a
    Skipped event reaches the monitoring topic (through a healthy publisher)."""
    tenant = f"lc-skip-{uuid.uuid4().hex[:6]}"
    dead = BackgroundPublisher(KafkaConnection("127.0.0.1:1"), capacity=1)
    dead.submit(Record(stack.topics.memory, b"x", b"fills the only slot"))
    healthy = BackgroundPublisher(stack.kafka)
    deployment = Deployment(stack.settings)
    deployment.stores(publisher=dead)  # the agent side's memory writes go to the dead broker
    middleware = MemstreamMiddleware(deployment, monitor=KafkaMonitor(healthy, stack.topics))
    model = RecordingChat(messages=answers())
    result = agent_with(middleware, model).invoke(
        {"messages": [{"role": "user", "content": "Remember my locker code is 4411."}]},
        config=ask("s1"),
        context=Context(tenant),
    )
    assert result["messages"][-1].text == "Noted (0)."

    def skipped(records: list[Any]) -> bool:
        return any(b'"Skipped"' in r.value and tenant.encode() in r.value for r in records)

    records = stack.read_topic(stack.topics.monitoring, skipped)
    notice = next(r.value.decode() for r in records if tenant.encode() in r.value)
    assert '"stage":"record"' in notice and '"code":"kafka_unavailable"' in notice
    healthy.close(5)
    dead.close(0)


def calling(name: str, args: dict[str, Any], then: str) -> RecordingChat:
    """A model that calls one tool, then answers `then`."""
    call = {"name": name, "args": args, "id": f"call-{name}", "type": "tool_call"}
    return RecordingChat(
        messages=iter([AIMessage(content="", tool_calls=[call]), AIMessage(content=then)])
    )


def test_remember_and_forget_tools(stack: TestStack) -> None:
    tenant = f"lc-tools-{uuid.uuid4().hex[:6]}"
    middleware = MemstreamMiddleware(Deployment(stack.settings), tools=True)
    assert [t.name for t in middleware.tools] == ["remember", "forget"]
    model = calling("remember", {"fact": "Sam is allergic to kiwi"}, "Saved.")
    result = agent_with(middleware, model).invoke(
        {"messages": [{"role": "user", "content": "Note my allergy."}]},
        config=ask("t1"),
        context=Context(tenant),
    )
    tool_reply = next(m for m in result["messages"] if m.type == "tool")
    assert "Remembered (memory id" in tool_reply.text
    memory_id = tool_reply.text.split("memory id ", 1)[1].rstrip(").")
    wait_until(lambda: recallable(stack, tenant, "kiwi"), "the remembered fact to be projected")

    model = calling("forget", {"memory_ids": [memory_id]}, "Forgotten.")
    agent_with(middleware, model).invoke(
        {"messages": [{"role": "user", "content": "Forget my allergy."}]},
        config=ask("t2"),
        context=Context(tenant),
    )

    def forgotten() -> bool:
        hits = stack.recaller().recall(tenant, "allergic to kiwi", k=10)
        return not any(h.memory.id == memory_id for h in hits)

    wait_until(forgotten, "the fact to be forgotten")
    middleware.close()


def test_an_unusable_tenant_refuses_the_input_before_any_model_call(
    middleware: MemstreamMiddleware,
) -> None:
    model = RecordingChat(messages=answers())
    with pytest.raises(InvalidTenantError, match="control or unassigned"):
        agent_with(middleware, model).invoke(
            {"messages": [{"role": "user", "content": "Hello"}]},
            config=ask("bad"),
            context=Context("acme\x00"),
        )
    assert model.seen == []
