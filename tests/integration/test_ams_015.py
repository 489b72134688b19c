"""What agent-memory-server 0.15 has beyond 0.14's routes, served by memstream against the
real stack: `hybrid_alpha` weighing meaning against words in the hybrid search, `text_scorer`
choosing RediSearch's scorer in the keyword mode, AMS's recency rerank when a client sends it, the
session-only prompt (`long_term_search: false`, MCP's `include_long_term_search=False`), and
compaction of exact duplicates as events (HTTP and MCP)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from agent_memory_client import MemoryAPIClient
from agent_memory_client.models import ClientMemoryRecord, RecencyConfig

from .helpers import scripted_chat, wait_until
from .serving import call_tool, mcp_over_http, serving, tenant_key

pytestmark = pytest.mark.integration

CAR, WINDOW, LUNCH = (
    "The car needs an oil change every spring",
    "The maintenance window is Sunday night",
    "Lunch is served at noon",
)


def _scores(http: httpx.Client, **search: object) -> dict[str, float]:
    body = {"text": "automobile maintenance", "limit": 10, **search}
    response = http.post("/v1/long-term-memory/search", json=body)
    assert response.status_code == 200, response.text
    return {m["text"]: m["score"] for m in response.json()["memories"]}


def test_hybrid_alpha_weighs_meaning_against_words(http: httpx.Client) -> None:
    memories = [{"id": uuid.uuid4().hex, "text": text} for text in (CAR, WINDOW, LUNCH)]
    response = http.post(
        "/v1/long-term-memory/?wait=true&wait_timeout=30", json={"memories": memories}
    )
    assert response.status_code == 200, response.text
    wait_until(lambda: len(_scores(http, search_mode="semantic")) == 3, "three memories searchable")

    meaning = _scores(http, search_mode="semantic")  # each memory's cosine with the query
    alone = _scores(http, search_mode="hybrid", hybrid_alpha=1.0)
    assert alone.keys() == meaning.keys()
    for text, cosine in meaning.items():
        assert alone[text] == pytest.approx(max(cosine, 0.0), abs=1e-4), text

    words = _scores(http, search_mode="hybrid", hybrid_alpha=0.0)
    assert words[WINDOW] == pytest.approx(1.0)  # the best word match, and the only one
    assert words.get(CAR, 0.0) == pytest.approx(0.0) and words.get(LUNCH, 0.0) == 0.0

    # In between, the blend AMS defines: alpha * meaning + (1 - alpha) * words.
    half = _scores(http, search_mode="hybrid", hybrid_alpha=0.5)
    assert half[WINDOW] == pytest.approx(0.5 * 1.0 + 0.5 * max(meaning[WINDOW], 0.0), abs=1e-4)
    assert half[CAR] == pytest.approx(0.5 * max(meaning[CAR], 0.0), abs=1e-4)


def test_text_scorer_picks_redisearchs_scorer_in_keyword_mode(http: httpx.Client) -> None:
    # BM25STD weighs a memory's length against the index's average, and the index is shared
    # with every other test of this namespace, some of whose memories are long: the long one
    # here (1,500 words, under the 8,000 characters a memory holds) stays far longer than any
    # average they make.
    filler = " ".join(f"w{n}" for n in range(1500))
    long, short = f"deploy deploy deploy {filler}", "we deploy"
    memories = [{"id": uuid.uuid4().hex, "text": text} for text in (long, short)]
    saved = http.post(
        "/v1/long-term-memory/?wait=true&wait_timeout=30", json={"memories": memories}
    )
    assert saved.status_code == 200, saved.text

    def first(**scorer: str) -> str:
        body = {"text": "deploy", "search_mode": "keyword", "limit": 2, **scorer}
        response = http.post("/v1/long-term-memory/search", json=body)
        assert response.status_code == 200, response.text
        found = response.json()["memories"]
        assert len(found) == 2
        return str(found[0]["text"])

    # DISMAX sums the term's counts alone; BM25STD (AMS's default) weighs them against the
    # memory's length.
    assert first(text_scorer="DISMAX") == long
    assert first(text_scorer="BM25STD") == short
    assert first() == first(text_scorer="BM25")  # memstream's default
    refused = http.post(
        "/v1/long-term-memory/search",
        json={"text": "deploy", "search_mode": "keyword", "text_scorer": "NOPE"},
    )
    assert refused.status_code == 422 and "BM25STD" in refused.json()["detail"]


async def test_recency_sent_by_the_python_client_reorders_the_page(
    client: MemoryAPIClient,
) -> None:
    long_ago = datetime.now(UTC) - timedelta(days=400)
    await client.create_long_term_memory(
        [
            ClientMemoryRecord(id="old", text="We deploy on Tuesdays", created_at=long_ago),
            ClientMemoryRecord(id="new", text="Tuesday is our release day for deploys"),
        ]
    )

    async def order(recency: RecencyConfig | None) -> list[str]:
        found = await client.search_long_term_memory(
            text="deploy Tuesdays", recency=recency, limit=2
        )
        return [m.id for m in found.memories]

    for _ in range(600):
        meaning = await order(None)
        if len(meaning) == 2:
            break
        await asyncio.sleep(0.05)
    assert sorted(meaning) == ["new", "old"]
    # AMS's rerank by its weights: all on recency (the year-old memory has none left), all
    # on the similarity (the order as ranked).
    newest = RecencyConfig(recency_boost=True, semantic_weight=0.0, recency_weight=1.0)
    assert await order(newest) == ["new", "old"]
    assert await order(RecencyConfig(semantic_weight=1.0, recency_weight=0.0)) == meaning
    assert await order(RecencyConfig(recency_boost=False, recency_weight=1.0)) == meaning


_CHAT = [
    {"role": "user", "content": "My cat is called Miso"},
    {"role": "assistant", "content": "Noted"},
]


def test_a_session_only_prompt_shows_the_session_and_no_long_term_memory(
    http: httpx.Client,
) -> None:
    session = f"chat-{uuid.uuid4().hex[:8]}"
    response = http.put(f"/v1/working-memory/{session}", json={"messages": _CHAT})
    assert response.status_code == 200, response.text
    saved = http.post(
        "/v1/long-term-memory/?wait=true&wait_timeout=30",
        json={"memories": [{"id": uuid.uuid4().hex, "text": "The user's cat is called Miso"}]},
    )
    assert saved.status_code == 200, saved.text

    body = {"query": "what is my cat called?", "session": {"session_id": session}}
    only = http.post("/v1/memory/prompt", json={**body, "long_term_search": False})
    assert only.status_code == 200, only.text
    shown = [(m["role"], m["content"]["text"]) for m in only.json()["messages"]]
    assert shown == [
        ("user", "My cat is called Miso"),
        ("assistant", "Noted"),
        ("user", "what is my cat called?"),
    ]
    assert only.json()["long_term_memories"] is None
    both = http.post("/v1/memory/prompt", json={**body, "long_term_search": True})
    assert any("semantic-memory" in m["content"]["text"] for m in both.json()["messages"])

    nothing = http.post("/v1/memory/prompt", json={"query": "x", "long_term_search": False})
    assert nothing.status_code == 422
    assert "give a session" in nothing.json()["detail"]


async def test_mcp_memory_prompt_without_long_term_search(server: str, key: str) -> None:
    session = f"chat-{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=server, headers=headers, timeout=30) as http:
        response = await http.put(f"/v1/working-memory/{session}", json={"messages": _CHAT})
        assert response.status_code == 200, response.text
    async with mcp_over_http(server, key) as mcp:
        prompt = await call_tool(
            mcp,
            "memory_prompt",
            query="what is my cat called?",
            session_id={"eq": session},
            include_long_term_search=False,
        )
    texts = [m["content"]["text"] for m in prompt["messages"]]
    assert texts == ["My cat is called Miso", "Noted", "what is my cat called?"]


def _texts(http: httpx.Client) -> list[str]:
    response = http.post("/v1/long-term-memory/search", json={"text": "", "limit": 100})
    assert response.status_code == 200, response.text
    return sorted(m["text"] for m in response.json()["memories"])


def _saved_and_compacted(http: httpx.Client, records: list[dict[str, str]]) -> str:
    """Save `records`, compact once both are applied, and answer the compaction's status."""
    saved = http.post("/v1/long-term-memory/?wait=true&wait_timeout=30", json={"memories": records})
    assert saved.status_code == 200, saved.text
    done = http.post("/v1/long-term-memory/compact?wait=true&wait_timeout=30")
    assert done.status_code == 200, done.text
    status: str = done.json()["status"]
    return status


def test_compaction_merges_exact_duplicates_as_events_the_history_shows(
    http: httpx.Client,
) -> None:
    copies = [uuid.uuid4().hex for _ in range(3)]
    records = [{"id": i, "text": "Deploys are on Tuesdays", "session_id": "ops"} for i in copies]
    records += [
        {"id": uuid.uuid4().hex, "text": "Deploys are on Tuesdays", "session_id": "other"},
        {"id": uuid.uuid4().hex, "text": "Deploys are on Tuesday", "session_id": "ops"},
    ]
    assert _saved_and_compacted(http, records) == "ok, 3 memories remaining after compaction"
    # The three copies of one session are one memory; another session's copy and a
    # different text (however near) stay as they were.
    assert _texts(http) == [
        "Deploys are on Tuesday",
        "Deploys are on Tuesdays",
        "Deploys are on Tuesdays",
    ]
    for copy in copies:
        assert http.get(f"/v1/long-term-memory/{copy}").status_code == 404
        history = http.get(f"/v1/long-term-memory/{copy}/history").json()["history"]
        assert [h["change"] for h in history] == ["recorded", "consolidated"]
        assert history[-1]["event_type"] == "MemoriesConsolidated"
    again = http.post("/v1/long-term-memory/compact?wait=true&wait_timeout=30")
    assert again.json() == {"status": "ok, 3 memories remaining after compaction"}


async def test_mcp_compacts_and_tells_the_time(server: str, key: str) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    same = [{"id": uuid.uuid4().hex, "text": "Lunch is at noon"} for _ in range(2)]
    async with httpx.AsyncClient(base_url=server, headers=headers, timeout=30) as http:
        response = await http.post(
            "/v1/long-term-memory/?wait=true&wait_timeout=30", json={"memories": same}
        )
        assert response.status_code == 200, response.text
    async with mcp_over_http(server, key) as mcp:
        compacted = await call_tool(mcp, "compact_long_term_memories")
        assert compacted == {"status": "ok, 1 memories remaining after compaction"}


@pytest.mark.usefixtures("worker")
def test_with_a_chat_model_compaction_merges_near_duplicates_in_one_call_each(
    env: dict[str, str], tenant: str, tmp_path: Path
) -> None:
    """A clique of near-duplicates becomes the model's merged memory; a memory near only one
    of them, or about something else, stays; the call is announced as `compaction` usage."""
    merged_text = "The user loves dark roast coffee, black"
    near = [
        "The user likes dark roast coffee",
        "The user really likes dark roast coffee",
        "The user likes dark roast coffee, black",
    ]
    apart = "Lunch is served at noon in the cafeteria"
    key = tenant_key(env, tenant)
    with (
        scripted_chat(merged_text) as (chat_url, asked),
        serving(
            env | {"MEMSTREAM_CHAT_BASE_URL": chat_url, "MEMSTREAM_CHAT_MODEL": "scripted"},
            tmp_path / "server.log",
        ) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as h,
    ):
        records = [{"id": uuid.uuid4().hex, "text": text} for text in [*near, apart]]
        assert _saved_and_compacted(h, records) == "ok, 2 memories remaining after compaction"
        assert _texts(h) == [apart, merged_text]
    (request,) = asked
    prompt = json.dumps(request["messages"])
    assert all(text in prompt for text in near) and apart not in prompt
