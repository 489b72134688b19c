"""One ranking: a question asked of a tenant through the memory middleware, the HTTP API (AMS's
own client) and the MCP tools (the official MCP client) recalls the same memories in the same
order, on the real stack (Kafka, a worker, Redis, `memstream serve`)."""

from __future__ import annotations

import re
import uuid

import pytest
from agent_memory_client import MemoryAPIClient, MemoryClientConfig
from agent_memory_client.models import ClientMemoryRecord, MemoryTypeEnum

from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.deployment import Deployment
from memstream.hooks import RecallConfig, SemanticMemoryMiddleware

from .helpers import TestStack, wait_until
from .serving import call_tool, mcp_over_http, tenant_key

pytestmark = pytest.mark.integration

QUESTION = "What does Ana drink in the morning before work?"
# Words and meaning pull apart, and two memories say one thing: a ranking by reciprocal rank
# and without deduplication (the server's before) orders these otherwise.
TEXTS = (
    "Ana drinks green tea every morning before work",
    "ana drinks green tea every morning, before work!",
    "Ana's brother Tomas drinks espresso after lunch",
    "In the morning Ana cycles to work along the river",
    "Ana dislikes coffee since a trip to Lisbon in 2019",
    "The office kitchen stocks oat milk and black tea",
    "Ana's morning routine starts with ten minutes of yoga",
    "Tomas works night shifts at the hospital",
    "Ana prefers sparkling water at dinner",
    "The team meets every Monday morning at nine",
    "Ana keeps a thermos of chamomile on her desk",
    "The user's cat Miso wakes everyone at six",
    "Breakfast for Ana is usually toast with honey",
    "Ana's favourite cafe closes before work hours",
    "Lisbon trip photos are in the shared drive",
    "Ana drinks her tea without sugar",
)
K = 12  # the middleware's recall_k, and what `memory_prompt` recalls when given no search
_LINE = re.compile(r"^- \[\d{4}-\d{2}-\d{2}(?:, [^\]]*)?\] (.*)$")


def _listed(section: str) -> list[str]:
    """The memories of a `semantic-memory` section, in the order it shows them."""
    return [m.group(1) for line in section.splitlines() if (m := _LINE.match(line))]


def _middleware_section(stack: TestStack, tenant: str) -> str:
    """What the memory middleware shows the model for QUESTION (recall only, nothing recorded)."""
    with Deployment(stack.settings) as deployment:
        stores = deployment.stores()
        model = ScriptedModel(["noted"])
        middleware = SemanticMemoryMiddleware(
            stores=stores, client=model, recall=RecallConfig(), monitor=stores.monitor
        )
        Agent(model, middleware=[middleware]).run(QUESTION, RunConfig("asking", tenant))
    (request,) = model.requests
    (section,) = request.sections
    assert section.title == "semantic-memory"
    return section.content


async def test_the_middleware_rest_and_mcp_recall_the_same_memories_in_the_same_order(
    server: str, env: dict[str, str], stack: TestStack
) -> None:
    tenant = f"ranking-{uuid.uuid4().hex[:8]}"
    key = tenant_key(env, tenant)
    client = MemoryAPIClient(MemoryClientConfig(base_url=server))
    client._client.headers["Authorization"] = f"Bearer {key}"
    async with client:
        records = [
            ClientMemoryRecord(text=text, memory_type=MemoryTypeEnum.SEMANTIC) for text in TEXTS
        ]
        assert (await client.create_long_term_memory(records)).status == "ok"
        wait_until(
            lambda: stack.stored_memories(tenant) == len(TEXTS), "the memories to be recallable"
        )

        section = _middleware_section(stack, tenant)
        by_middleware = _listed(section)
        found = await client.search_long_term_memory(QUESTION, limit=K)
        by_rest = [memory.text for memory in found.memories]
        prompt = await client.memory_prompt(QUESTION)
        rest_prompt = prompt["messages"][0]["content"]["text"]

    async with mcp_over_http(server, key) as session:
        searched = await call_tool(session, "search_long_term_memory", text=QUESTION, limit=K)
        by_mcp = [memory["text"] for memory in searched["memories"]]
        prompted = await call_tool(session, "memory_prompt", query=QUESTION, limit=K)
        mcp_prompt = prompted["messages"][0]["content"]["text"]

    # A full page: the list is ranked, not merely everything the tenant has.
    assert len(by_middleware) == K, section
    assert by_rest == by_middleware
    assert by_mcp == by_middleware
    assert rest_prompt == mcp_prompt == f"## semantic-memory\n{section}"
    # The ranking is recall's: the duplicate takes no slot, and the answer comes first.
    assert by_middleware[0] in TEXTS[:2] and not {*TEXTS[:2]} <= {*by_middleware}
    assert found.total == len(TEXTS) and searched["total"] == len(TEXTS)
