"""Lineage through the HTTP API and MCP: a memory's history (tenant-scoped, 404 for an id the
tenant never had) and search as of a moment, on the real stack."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import anyio
import httpx
import pytest

from .serving import call_tool, mcp_over_http, tenant_key

pytestmark = pytest.mark.integration


def test_history_and_as_of_over_http_and_mcp(server: str, env: dict[str, str]) -> None:
    tenant = f"lin-{uuid.uuid4().hex[:8]}"
    key, stranger = tenant_key(env, tenant), tenant_key(env, f"x{tenant}")
    memory_id = uuid.uuid4().hex
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {key}"}) as http:
        created = http.post(
            "/v1/long-term-memory/?wait=true",
            json={"memories": [{"id": memory_id, "text": "The office is in Dublin"}]},
        )
        assert created.status_code == 200, created.text
        moment = datetime.now(UTC).isoformat()
        edited = http.patch(
            f"/v1/long-term-memory/{memory_id}?wait=true", json={"text": "The office is in Cork"}
        )
        assert edited.status_code == 200, edited.text

        shown = http.get(f"/v1/long-term-memory/{memory_id}/history")
        assert shown.status_code == 200, shown.text
        body = shown.json()
        assert body["id"] == memory_id
        assert [h["change"] for h in body["history"]] == ["recorded", "edited"]
        assert {h["event_type"] for h in body["history"]} == {"MemorySaved"}

        then = http.post(
            "/v1/long-term-memory/search", json={"text": "where is the office", "as_of": moment}
        )
        assert then.status_code == 200, then.text
        assert [m["text"] for m in then.json()["memories"]] == ["The office is in Dublin"]
        now = http.post("/v1/long-term-memory/search", json={"text": "where is the office"})
        assert [m["text"] for m in now.json()["memories"]] == ["The office is in Cork"]

        filtered = http.post(
            "/v1/long-term-memory/search",
            json={"text": "office", "as_of": moment, "topics": {"eq": "x"}},
        )
        assert filtered.status_code == 422, filtered.text
        assert "topics" in filtered.json()["detail"]
        assert http.get("/v1/long-term-memory/never-had-it/history").status_code == 404

    headers = {"Authorization": f"Bearer {stranger}"}
    with httpx.Client(base_url=server, headers=headers) as other:
        # Another tenant's key never sees this tenant's log.
        assert other.get(f"/v1/long-term-memory/{memory_id}/history").status_code == 404

    async def over_mcp() -> None:
        async with mcp_over_http(server, key) as session:
            history = await call_tool(session, "long_term_memory_history", memory_id=memory_id)
            assert [h["change"] for h in history["history"]] == ["recorded", "edited"]
            found = await call_tool(
                session, "search_long_term_memory", text="where is the office", as_of=moment
            )
            assert [m["text"] for m in found["memories"]] == ["The office is in Dublin"]

    anyio.run(over_mcp)


def test_an_as_of_search_gives_provenance_as_the_live_record_has_it(
    server: str, env: dict[str, str]
) -> None:
    tenant = f"prov-{uuid.uuid4().hex[:8]}"
    key = tenant_key(env, tenant)
    kept, edited = uuid.uuid4().hex, uuid.uuid4().hex
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {key}"}) as http:
        created = http.post(
            "/v1/long-term-memory/?wait=true",
            json={
                "memories": [
                    {"id": kept, "text": "The office is in Dublin"},
                    {"id": edited, "text": "The team meets on Mondays"},
                ]
            },
        )
        assert created.status_code == 200, created.text
        moment = datetime.now(UTC).isoformat()
        changed = http.patch(
            f"/v1/long-term-memory/{edited}?wait=true", json={"text": "The team meets on Fridays"}
        )
        assert changed.status_code == 200, changed.text

        then = http.post(
            "/v1/long-term-memory/search", json={"text": "office team", "as_of": moment}
        )
        assert then.status_code == 200, then.text
        found = {m["id"]: m for m in then.json()["memories"]}
        assert set(found) == {kept, edited}
        live = http.get(f"/v1/long-term-memory/{kept}").json()
        assert live["provenance"]["offset"] is not None
        assert found[kept]["provenance"] == live["provenance"]  # unchanged since: the same
        # The edited one, as it stood: the first write's provenance, not the edit's.
        now = http.get(f"/v1/long-term-memory/{edited}").json()["provenance"]
        was = found[edited]["provenance"]
        assert was["event_type"] == now["event_type"] == "MemorySaved"
        assert was["offset"] < now["offset"] and was["event_id"] != now["event_id"]
