"""Working memory through agent-memory-client 0.14 against a running `memstream serve`, on the
real stack: sessions put, appended, listed and deleted; every exchange recorded once as a turn
of its session and recallable from any session of the tenant (never another's); concurrent
appends that all keep their messages; a stale versioned put refused; the window; the tool
helpers resolving a scripted model's tool calls; the recorded turns surviving a replay.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_memory_client import MemoryAPIClient
from agent_memory_client.models import MemoryMessage, WorkingMemory

from memstream import Settings, TurnCompleted
from memstream.deployment import Deployment
from memstream.memory.model import LONG_TERM_PROMPT, LONG_TERM_STRATEGY
from memstream.memory.monitoring import ModelUsage

from .commands import memstream
from .helpers import TestStack, scripted_chat, wait_until
from .serving import ams_client, new_tenant, serving, tenant_key

pytestmark = pytest.mark.integration


def _memories(http: httpx.Client, session: str | None = None) -> list[str]:
    """The texts of the key's tenant's long-term memories (of one session, if given)."""
    body: dict[str, object] = {"text": "", "limit": 100}
    if session is not None:
        body["session_id"] = {"eq": session}
    response = http.post("/v1/long-term-memory/search", json=body)
    assert response.status_code == 200, response.text
    return sorted(m["text"] for m in response.json()["memories"])


def _session(http: httpx.Client, session: str, query: str = "") -> httpx.Response:
    return http.get(f"/v1/working-memory/{session}{query}")


def _settled(http: httpx.Client) -> None:
    """Write one memory and wait until it is applied: a tenant's events are applied in order,
    so everything sent for the tenant before it has been applied too."""
    body = {"memories": [{"id": uuid.uuid4().hex, "text": "sentinel", "session_id": "zz"}]}
    response = http.post("/v1/long-term-memory/?wait=true&wait_timeout=30", json=body)
    assert response.status_code == 200, response.text


def _turn(user: str, answer: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]


async def test_a_two_session_conversation_is_recorded_once_and_recalled_across_sessions(
    client: MemoryAPIClient, http: httpx.Client, server: str, env: dict[str, str]
) -> None:
    created, memory = await client.get_or_create_working_memory("trip-a")
    assert created and memory.messages == []
    created, _ = await client.get_or_create_working_memory("trip-a")
    assert not created

    await client.append_messages_to_working_memory(
        "trip-a", _turn("I am moving to Lisbon in March", "Lisbon in March, noted.")
    )
    after = await client.append_messages_to_working_memory(
        "trip-a", _turn("My daughter Ana is allergic to peanuts", "I will remember that.")
    )
    assert [m.content for m in after.messages][-1] == "I will remember that."
    await client.append_messages_to_working_memory(
        "trip-b", _turn("Let's plan the flights", "Which dates suit you?")
    )
    listed = await client.list_sessions()
    assert listed.sessions == ["trip-a", "trip-b"] and listed.total == 2
    assert (await client.list_sessions(limit=1, offset=1)).sessions == ["trip-b"]

    # Each exchange is one turn: two memories (question, answer) of the session's thread.
    wait_until(lambda: len(_memories(http, "trip-a")) == 4, "session A's two turns")
    # Putting the whole session again (what the client does on every append) records nothing.
    _, held = await client.get_or_create_working_memory("trip-a")
    await client.put_working_memory("trip-a", held)
    _settled(http)
    assert len(_memories(http, "trip-a")) == 4

    prompt = await client.memory_prompt("Where am I moving to?", session_id="trip-b")
    roles = [m["role"] for m in prompt["messages"]]
    assert roles == ["user", "assistant", "system", "user"]
    assert prompt["messages"][0]["content"]["text"] == "Let's plan the flights"
    assert "Lisbon" in prompt["messages"][2]["content"]["text"]

    stranger = tenant_key(env, new_tenant("other"))
    async with ams_client(server, stranger) as other:
        theirs = await other.memory_prompt("Where am I moving to?", session_id="trip-a")
        assert "Lisbon" not in json.dumps(theirs)
        assert (await other.list_sessions()).total == 0
        with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {stranger}"}) as h:
            gone = _session(h, "trip-a")
        assert gone.status_code == 404 and gone.json()["code"] == "session_not_found"

    assert (await client.delete_working_memory("trip-a")).status == "ok"
    assert _session(http, "trip-a").status_code == 404
    assert (await client.list_sessions()).sessions == ["trip-b"]
    assert len(_memories(http, "trip-a")) == 4  # what the session recorded stays
    # Sent again to a fresh session of the same id (its record of what it sent is gone), the
    # same exchanges are the same events: the projection applies them once.
    await client.put_working_memory("trip-a", held)
    _settled(http)
    assert len(_memories(http, "trip-a")) == 4


async def test_concurrent_appends_from_two_clients_keep_every_message(
    server: str, key: str, http: httpx.Client
) -> None:
    async with ams_client(server, key) as one, ams_client(server, key) as two:
        await one.get_or_create_working_memory("busy")

        async def talk(client: MemoryAPIClient, who: str) -> None:
            for i in range(6):
                await client.append_messages_to_working_memory(
                    "busy", [{"role": "user", "content": f"{who} says {i}"}]
                )

        await asyncio.gather(talk(one, "one"), talk(two, "two"))
    held = _session(http, "busy").json()
    said = [m["content"] for m in held["messages"]]
    assert sorted(said) == sorted(f"{w} says {i}" for w in ("one", "two") for i in range(6))
    assert [s for s in said if s.startswith("one")] == [f"one says {i}" for i in range(6)]

    # memstream's own append is atomic too.
    async def append(i: int) -> int:
        async with httpx.AsyncClient(base_url=server, headers=http.headers, timeout=30) as h:
            body = {"messages": [{"role": "user", "content": f"direct {i}"}]}
            return (await h.post("/v1/working-memory/busy/messages", json=body)).status_code

    assert await asyncio.gather(*(append(i) for i in range(8))) == [200] * 8
    assert len(_session(http, "busy").json()["messages"]) == 12 + 8


def test_a_sessions_extraction_strategy_travels_with_its_turns(
    http: httpx.Client, settings: Settings, tenant: str
) -> None:
    """The extraction job reads each turn's `long_term_memory_strategy` off the turn itself
    (docs/memory.md, "Extraction"): the session's, with a custom strategy's prompt."""
    strategy = {"strategy": "custom", "config": {"custom_prompt": "List the pets named."}}
    body = {"messages": _turn("My cat is Tom", "Hi Tom!"), "long_term_memory_strategy": strategy}
    assert http.put("/v1/working-memory/pets", json=body).status_code == 200
    _settled(http)
    with Deployment(settings) as deployment:
        (turn,) = [
            e.event
            for e in deployment.lineage().log(tenant).events
            if isinstance(e.event, TurnCompleted) and e.event.thread == "pets"
        ]
    assert turn.metadata == {
        LONG_TERM_STRATEGY: "custom",
        LONG_TERM_PROMPT: "List the pets named.",
    }
    assert http.get("/v1/working-memory/pets").json()["long_term_memory_strategy"] == strategy


def test_a_put_with_a_stale_version_is_refused_and_says_what_to_do(http: httpx.Client) -> None:
    first = http.put("/v1/working-memory/v", json={"messages": _turn("hi there you", "hello")})
    assert first.status_code == 200 and first.json()["version"] == 1
    second = http.put("/v1/working-memory/v", json={"version": 1, "data": {"k": 1}})
    assert second.status_code == 200 and second.json()["version"] == 2
    assert second.json()["messages"] == []  # a versioned put replaces exactly
    stale = http.put("/v1/working-memory/v", json={"version": 1, "context": "lost?"})
    assert stale.status_code == 409
    assert stale.json()["code"] == "stale_session"
    assert "GET it again" in stale.json()["detail"]
    assert http.get("/v1/working-memory/v").json()["data"] == {"k": 1}
    assert http.put("/v1/working-memory/new", json={"version": 3}).status_code == 409
    assert http.put("/v1/working-memory/new", json={"version": 0}).status_code == 200
    mismatch = http.put("/v1/working-memory/v", json={"session_id": "w"})
    assert mismatch.status_code == 422


def test_messages_past_the_window_leave_it_counted_in_context_and_stay_recorded(
    http: httpx.Client,
) -> None:
    talk = [m for i in range(6) for m in _turn(f"question {i} " + "x" * 60, f"answer {i}")]
    put = http.put("/v1/working-memory/long?context_window_max=200", json={"messages": talk})
    assert put.status_code == 200, put.text
    body = put.json()
    kept = len(body["messages"])
    assert 1 <= kept < 12
    assert body["context"].startswith(f"{12 - kept} earlier message(s)")
    assert body["context_percentage_total_used"] is not None
    assert body["messages"][-1]["content"] == "answer 5"
    # The dropped exchanges were recorded before they left: all six turns are long-term.
    wait_until(lambda: len(_memories(http, "long")) == 12, "the six turns")
    # A read with a smaller window shows fewer messages, and the session keeps them.
    narrow = http.get("/v1/working-memory/long?context_window_max=10").json()
    assert len(narrow["messages"]) == 1
    assert len(http.get("/v1/working-memory/long").json()["messages"]) == kept


def test_an_unknown_model_name_is_refused_naming_the_known_ones(http: httpx.Client) -> None:
    """AMS 0.14 types model_name as its list of models, so a name outside it is a 422; so is
    it here, saying which names are known and that context_window_max gives the window."""
    assert http.put("/v1/working-memory/m", json={"messages": []}).status_code == 200
    refusals = [
        http.get("/v1/working-memory/m?model_name=my-own-llm"),
        http.put("/v1/working-memory/m?model_name=gpt-5", json={"messages": []}),
        http.post(
            "/v1/memory/prompt",
            json={"query": "hi", "session": {"session_id": "m", "model_name": "my-own-llm"}},
        ),
    ]
    for refused in refusals:
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "invalid_input"
        assert "gpt-4o-mini" in refused.json()["detail"]
        assert "context_window_max" in refused.json()["detail"]
    assert http.get("/v1/working-memory/m").json()["version"] == 1  # the refused put stored nothing
    known = http.get("/v1/working-memory/m?model_name=gpt-3.5-turbo")
    assert known.status_code == 200, known.text
    assert known.json()["context_percentage_total_used"] is not None  # its window, 4,096


async def test_the_tool_helpers_resolve_a_scripted_models_tool_calls(
    client: MemoryAPIClient, http: httpx.Client
) -> None:
    tools = [t["function"]["name"] for t in MemoryAPIClient.get_all_memory_tool_schemas()]
    assert {"search_memory", "get_or_create_working_memory"} <= set(tools)
    await client.append_messages_to_working_memory(
        "tools", _turn("I drive a green Volvo from 1994", "A classic!")
    )
    wait_until(lambda: len(_memories(http, "tools")) == 2, "the turn")
    # What a model would answer: OpenAI-style tool calls, resolved by the client's helpers.
    script = [
        ("get_or_create_working_memory", {}),
        ("add_memory_to_working_memory", {"text": "The user's car is a 1994 Volvo"}),
        ("search_memory", {"query": "what car does the user drive?", "max_results": 3}),
    ]
    results = []
    for i, (name, arguments) in enumerate(script):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        results.append(await client.resolve_tool_call(tool_call=call, session_id="tools"))
    assert all(r["success"] for r in results), results
    assert results[0]["result"]["message_count"] == 2
    assert "Volvo" in results[2]["formatted_response"] or any(
        "Volvo" in m["text"] for m in results[2]["result"]["memories"]
    )
    # The structured memory the tool added is a long-term memory of the tenant.
    wait_until(
        lambda: "The user's car is a 1994 Volvo" in _memories(http, "tools"),
        "the tool's memory to be long-term",
    )
    _, memory = await client.get_or_create_working_memory("tools")
    assert [m.text for m in memory.memories] == ["The user's car is a 1994 Volvo"]


async def test_recorded_turns_survive_a_replay(
    client: MemoryAPIClient, http: httpx.Client, env: dict[str, str], tenant: str
) -> None:
    session = WorkingMemory(
        session_id="kept",
        messages=[
            MemoryMessage(role="user", content="My locker code is 4417"),
            MemoryMessage(role="assistant", content="Stored."),
        ],
    )
    await client.put_working_memory("kept", session)
    wait_until(lambda: len(_memories(http, "kept")) == 2, "the turn")
    before = _memories(http, "kept")
    replayed = memstream(env, "replay", "--tenant", tenant)
    assert replayed.returncode == 0, replayed.stderr
    assert _memories(http, "kept") == before
    assert "My locker code is 4417" in before


@pytest.fixture
def chat() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with scripted_chat("SUMMARY: Lisbon") as scripted:
        yield scripted


def test_with_a_chat_model_messages_past_the_window_are_summarised_in_one_counted_call(
    env: dict[str, str],
    stack: TestStack,
    chat: tuple[str, list[dict[str, Any]]],
    tenant: str,
    tmp_path: Path,
) -> None:
    chat_url, asked_all = chat
    key = tenant_key(env, tenant)
    with_model = env | {"MEMSTREAM_CHAT_BASE_URL": chat_url, "MEMSTREAM_CHAT_MODEL": "scripted"}
    with (
        serving(with_model, tmp_path / "server.log") as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as h,
    ):
        talk = [m for i in range(6) for m in _turn(f"question {i} " + "x" * 60, f"answer {i}")]
        put = h.put("/v1/working-memory/summed?context_window_max=200", json={"messages": talk})
        assert put.status_code == 200, put.text
        assert put.json()["context"] == "SUMMARY: Lisbon"
        assert put.json()["tokens"] == 129
        # Under the window: no call.
        assert h.put("/v1/working-memory/short", json={"messages": talk[:2]}).status_code == 200
    (asked,) = asked_all
    prompt = json.dumps(asked["messages"])
    assert "question 0" in prompt and "answer 5" not in prompt  # only what left the window

    key_bytes = tenant.encode()

    def usage(records: list[object]) -> list[dict[str, object]]:
        found = [json.loads(r.value) for r in records if r.key == key_bytes]  # type: ignore[attr-defined]
        return [n for n in found if n["type"] == ModelUsage.type]

    (notice,) = usage(stack.read_topic(stack.topics.monitoring, lambda rs: len(usage(rs)) >= 1))
    assert notice["purpose"] == "working-memory-summary" and notice["thread"] == "summed"
    assert (notice["calls"], notice["input_tokens"], notice["output_tokens"]) == (1, 120, 9)
