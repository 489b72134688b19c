"""A user's own tests of a LangChain agent with memory, on memstream's pytest plugin: the
stack comes from the `memstream_stack` fixture, a fresh tenant per test from
`memstream_tenant` (docs/integrations.md shows this file)."""

import itertools
from dataclasses import dataclass

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from memstream.integrations.langchain import MemstreamMiddleware
from memstream.testing import wait_until_recallable


class ScriptedChat(GenericFakeChatModel):
    """A fake chat model that keeps the system prompt of every call it gets."""

    system_prompts: list[str] = Field(default_factory=list)

    def _generate(self, messages, *args, **kwargs):
        self.system_prompts.append(messages[0].text)
        return super()._generate(messages, *args, **kwargs)


@dataclass
class Context:
    user_id: str


def test_the_agent_recalls_a_fact_in_another_thread(memstream_stack, memstream_tenant):
    with memstream_stack.deployment() as deployment:
        memory = MemstreamMiddleware(deployment)
        model = ScriptedChat(messages=(AIMessage(f"Noted ({n}).") for n in itertools.count()))
        agent = create_agent(
            model,
            system_prompt="You are terse.",
            middleware=[memory],
            context_schema=Context,
            checkpointer=InMemorySaver(),
        )

        def ask(text, thread, tenant=memstream_tenant):
            agent.invoke(
                {"messages": [{"role": "user", "content": text}]},
                config={"configurable": {"thread_id": thread}},
                context=Context(tenant),
            )

        ask("My favourite colour is teal.", thread="monday")
        wait_until_recallable(deployment, memstream_tenant, "teal")

        ask("What is my favourite colour?", thread="friday")
        assert "teal" in model.system_prompts[-1]

        ask("What is my favourite colour?", thread="friday", tenant=memstream_tenant + "-other")
        assert "teal" not in model.system_prompts[-1]
        memory.close()
