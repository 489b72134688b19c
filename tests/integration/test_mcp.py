"""The official MCP client against memstream's MCP tools: `memstream mcp --tenant T` over stdio,
and the same tools over streamable HTTP at `/mcp` of `memstream serve`, on the real stack."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from .helpers import DEADLINE_S
from .serving import call_tool, create_key, mcp_over_http, tenant_key

pytestmark = pytest.mark.integration

TOOLS = {
    "create_long_term_memories",
    "edit_long_term_memory",
    "search_long_term_memory",
    "get_long_term_memory",
    "delete_long_term_memories",
    "memory_prompt",
    "set_working_memory",
    "get_working_memory",
    "get_current_datetime",
}


@asynccontextmanager
async def _stdio(env: dict[str, str], tenant: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memstream", "mcp", "--tenant", tenant], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def _eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await anyio.sleep(0.05)


async def _every_tool(session: ClientSession, tenant: str) -> None:
    listed = await session.list_tools()
    assert {tool.name for tool in listed.tools} >= TOOLS

    before = int(time.time())
    clock = await call_tool(session, "get_current_datetime")
    assert before <= clock["unix_ts"] <= time.time()
    at = datetime.fromtimestamp(clock["unix_ts"], UTC)
    assert clock["iso_utc"] == at.strftime("%Y-%m-%dT%H:%M:%SZ")

    memory_id = uuid.uuid4().hex
    ack = await call_tool(
        session,
        "create_long_term_memories",
        memories=[
            {"id": memory_id, "text": "The user's dog is called Pixel", "session_id": "walks"},
            {"text": "The user lives in Lisbon", "memory_type": "semantic"},
        ],
    )
    assert ack == {"status": "ok"}

    async def both_recallable() -> bool:
        found = await call_tool(session, "search_long_term_memory", text="dog")
        return bool(found["total"] == 2)

    await _eventually(both_recallable, "the memories to be recallable")
    found = await call_tool(session, "search_long_term_memory", text="what is the dog called?")
    assert found["memories"][0]["id"] == memory_id
    assert found["memories"][0]["namespace"] == tenant

    got = await call_tool(session, "get_long_term_memory", memory_id=memory_id)
    assert got["text"] == "The user's dog is called Pixel" and got["session_id"] == "walks"
    assert got["provenance"]["event_type"] == "MemorySaved" and got["provenance"]["offset"] >= 0
    assert found["memories"][0]["provenance"] == got["provenance"]

    edited = await call_tool(
        session, "edit_long_term_memory", memory_id=memory_id, text="The user's dog is Pixel II"
    )
    assert edited["text"] == "The user's dog is Pixel II" and edited["session_id"] == "walks"

    async def edit_applied() -> bool:
        got = await call_tool(session, "get_long_term_memory", memory_id=memory_id)
        return bool(got["text"] == "The user's dog is Pixel II")

    await _eventually(edit_applied, "the edit to be applied")

    prompt = await call_tool(session, "memory_prompt", query="where does the user live?")
    system = prompt["messages"][0]["content"]["text"]
    assert "## semantic-memory" in system and "The user lives in Lisbon" in system

    # The tenant never comes from a tool argument: naming another one is refused.
    foreign = await session.call_tool(
        "search_long_term_memory", {"text": "dog", "namespace": {"eq": "someone-else"}}
    )
    assert foreign.is_error and "forbidden" in foreign.content[0].text  # type: ignore[union-attr]

    deleted = await call_tool(session, "delete_long_term_memories", memory_ids=[memory_id])
    assert deleted == {"status": "ok, deleted 1 memories"}

    async def gone() -> bool:
        result = await session.call_tool("get_long_term_memory", {"memory_id": memory_id})
        return bool(result.is_error)

    await _eventually(gone, "the memory to be deleted")

    # Working memory: a session set, read back, its exchange recorded and in the prompt.
    empty = await call_tool(session, "get_working_memory", session_id="chat-1")
    assert empty["messages"] == [] and empty["session_id"] == "chat-1"
    stored = await call_tool(
        session,
        "set_working_memory",
        session_id="chat-1",
        messages=[
            {"role": "user", "content": "My favourite tea is genmaicha"},
            {"role": "assistant", "content": "Genmaicha, noted."},
        ],
        data={"mood": "calm"},
    )
    assert stored["version"] == 1 and stored["ttl_seconds"] == 3600
    held = await call_tool(session, "get_working_memory", session_id="chat-1")
    assert [m["content"] for m in held["messages"]] == [
        "My favourite tea is genmaicha",
        "Genmaicha, noted.",
    ]
    assert held["data"] == {"mood": "calm"}

    async def turn_recorded() -> bool:
        found = await call_tool(
            session, "search_long_term_memory", text="tea", session_id={"eq": "chat-1"}
        )
        return bool(found["total"] == 2)

    await _eventually(turn_recorded, "the session's turn to be long-term")
    prompt = await call_tool(
        session, "memory_prompt", query="what tea?", session_id={"eq": "chat-1"}
    )
    assert prompt["messages"][0]["content"]["text"] == "My favourite tea is genmaicha"


@pytest.mark.usefixtures("worker")
async def test_stdio_tools_for_the_configured_tenant(env: dict[str, str]) -> None:
    tenant = f"mcp-{uuid.uuid4().hex[:8]}"
    async with _stdio(env, tenant) as session:
        await _every_tool(session, tenant)


async def test_http_tools_for_the_keys_tenant(server: str, env: dict[str, str]) -> None:
    tenant = f"mcp-http-{uuid.uuid4().hex[:8]}"
    async with mcp_over_http(server, tenant_key(env, tenant)) as session:
        await _every_tool(session, tenant)


async def test_http_tools_at_the_namespace_path_of_the_keys_tenant(
    server: str, env: dict[str, str]
) -> None:
    """AMS serves MCP at `/{namespace}/mcp` too: there the namespace is the key's tenant, and
    another tenant's is refused before any MCP session."""
    tenant = f"mcp-ns-{uuid.uuid4().hex[:8]}"
    key = tenant_key(env, tenant)
    async with mcp_over_http(server, key, path=f"/{tenant}/mcp") as session:
        listed = await session.list_tools()
        assert {tool.name for tool in listed.tools} >= TOOLS
        saved = await call_tool(
            session, "create_long_term_memories", memories=[{"text": "The path is the tenant"}]
        )
        assert saved == {"status": "ok"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{server}/globex-{tenant}/mcp", json=hello, headers=headers)
    assert response.status_code == 403, response.text
    assert response.json()["code"] == "forbidden"


def test_http_mcp_needs_a_tenant_key(server: str, env: dict[str, str]) -> None:
    """Refused at the door, before any MCP session: no key, a wrong key, an admin key."""
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    admin = create_key(env, "--admin")
    for key, status in ((None, 401), ("msk_000000000000_wrong", 401), (admin, 403)):
        headers = {**accept, **({"Authorization": f"Bearer {key}"} if key else {})}
        response = httpx.post(f"{server}/mcp", json=hello, headers=headers)
        assert response.status_code == status, response.text
        assert response.json()["code"] in {"not_authenticated", "forbidden"}
