"""agent-memory-server's own client against a running `memstream serve`, on the real stack.

The client has no key option; like AMS's token mode, it sends whatever headers its httpx
client carries, so each test sets `Authorization` on it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from agent_memory_client import MemoryAPIClient
from agent_memory_client.exceptions import MemoryNotFoundError, MemoryServerError
from agent_memory_client.filters import Namespace, SessionId
from agent_memory_client.models import ClientMemoryRecord, ForgetPolicy, MemoryTypeEnum

from .helpers import TestStack, wait_until
from .serving import ams_client, new_tenant, tenant_key

pytestmark = pytest.mark.integration


def _count(http: httpx.Client) -> int:
    """How many memories the key's tenant has, read through the API (text-less search)."""
    response = http.post("/v1/long-term-memory/search", json={"text": ""})
    assert response.status_code == 200, response.text
    total: int = response.json()["total"]
    return total


def _sentinel(http: httpx.Client) -> None:
    """Write one memory and wait until it is recallable: since a tenant's events are applied
    in order, everything sent for the tenant before it has been applied (or refused) too."""
    body = {"memories": [{"id": uuid.uuid4().hex, "text": "sentinel"}]}
    response = http.post("/v1/long-term-memory/?wait=true", json=body)
    assert response.status_code == 200, response.text


def _provenance(http: httpx.Client, memory_id: str, text: str) -> tuple[Any, Any]:
    """A memory's provenance as GET returns it, and the best search hit's for `text`."""
    got = http.get(f"/v1/long-term-memory/{memory_id}")
    assert got.status_code == 200, got.text
    hits = http.post("/v1/long-term-memory/search", json={"text": text})
    assert hits.status_code == 200, hits.text
    return got.json()["provenance"], hits.json()["memories"][0]["provenance"]


async def test_create_search_across_sessions_get_prompt_delete(
    client: MemoryAPIClient, http: httpx.Client, tenant: str
) -> None:
    records = [
        ClientMemoryRecord(text="The user's favourite colour is teal", session_id="monday"),
        ClientMemoryRecord(
            text="The team's database is Postgres 16",
            session_id="tuesday",
            memory_type=MemoryTypeEnum.EPISODIC,
            topics=["infra"],
        ),
        ClientMemoryRecord(text="The user has a cat named Miso", session_id="tuesday"),
    ]
    ack = await client.create_long_term_memory(records)
    assert ack.status == "ok"
    wait_until(lambda: _count(http) == 3, "three memories to be recallable")

    found = await client.search_long_term_memory("which database do we use?", limit=5)
    assert found.total == 3
    assert found.memories[0].text == "The team's database is Postgres 16"
    assert {m.session_id for m in found.memories} == {"monday", "tuesday"}
    assert found.memories[0].namespace == tenant

    monday = await client.search_long_term_memory("colour", session_id=SessionId(eq="monday"))
    assert [m.text for m in monday.memories] == ["The user's favourite colour is teal"]
    paged = await client.search_long_term_memory("user", limit=1, offset=0)
    assert len(paged.memories) == 1 and paged.next_offset == 1 and paged.total == 3

    fetched = await client.get_long_term_memory(records[1].id)
    assert fetched.text == records[1].text
    # memstream's provenance rides as an extra field: the client reads past it, plain HTTP
    # shows which event made the memory and where it sits in the log.
    raw, searched = _provenance(http, records[1].id, "database")
    assert raw["event_type"] == "MemorySaved" and raw["thread"] == "tuesday"
    assert raw["topic"] and raw["partition"] >= 0 and raw["offset"] >= 0
    assert raw["run"] is None and raw["turn"] is None
    assert searched == raw
    assert fetched.memory_type == MemoryTypeEnum.EPISODIC and fetched.topics == ["infra"]
    assert fetched.session_id == "tuesday"

    prompt = await client.memory_prompt("what is my cat called?", long_term_search={"limit": 5})
    system, user = prompt["messages"]
    assert system["role"] == "system" and "## semantic-memory" in system["content"]["text"]
    assert "The user has a cat named Miso" in system["content"]["text"]
    assert user["content"]["text"] == "what is my cat called?"

    deleted = await client.delete_long_term_memories([records[2].id])
    assert deleted.status == "ok, deleted 1 memories"
    wait_until(lambda: _count(http) == 2, "the deleted memory to go")
    with pytest.raises(MemoryNotFoundError):
        await client.get_long_term_memory(records[2].id)


async def test_the_same_record_sent_twice_is_one_memory(
    client: MemoryAPIClient, http: httpx.Client, stack: TestStack, tenant: str
) -> None:
    record = ClientMemoryRecord(text="The user prefers window seats", session_id="s")
    await client.create_long_term_memory([record])
    await client.create_long_term_memory([record])  # a retry after a lost answer
    _sentinel(http)
    assert stack.stored_memories(tenant) == 2  # the record once, and the sentinel

    # The id is also the handle: saving it again with other content (and a new time, so a
    # new place in the eviction order) replaces the memory, and its old place goes with it.
    changed = record.model_copy(
        update={"text": "The user prefers aisle seats", "created_at": datetime.now(UTC)}
    )
    await client.create_long_term_memory([changed])
    _sentinel(http)
    assert stack.stored_memories(tenant) == 3
    assert (await client.get_long_term_memory(record.id)).text == "The user prefers aisle seats"
    assert stack.redis.zcard(stack.status.live().order(tenant)) == 3


async def test_edit_changes_some_fields_and_keeps_the_rest(
    client: MemoryAPIClient, http: httpx.Client, stack: TestStack, tenant: str
) -> None:
    record = ClientMemoryRecord(
        text="The user's flight leaves at 9", session_id="trip", topics=["travel"]
    )
    await client.create_long_term_memory([record])
    wait_until(lambda: _count(http) == 1, "the memory to be recallable")
    edited = await client.edit_long_term_memory(
        record.id, {"text": "The user's flight leaves at 11", "pinned": True}
    )
    assert edited.text == "The user's flight leaves at 11"
    assert edited.session_id == "trip" and edited.topics == ["travel"]

    def changed() -> bool:
        got = http.get(f"/v1/long-term-memory/{record.id}").json()
        return bool(got["text"] == "The user's flight leaves at 11")

    wait_until(changed, "the edit to be applied")
    # The client model drops `pinned` and `importance`: read the raw answer.
    fetched = (await client._client.get(f"/v1/long-term-memory/{record.id}")).json()
    assert fetched["pinned"] and fetched["importance"] == 1.0
    assert fetched["topics"] == ["travel"] and fetched["session_id"] == "trip"
    assert stack.stored_memories(tenant) == 1
    assert stack.redis.zcard(stack.status.live().order(tenant)) == 1  # one place, the new one
    with pytest.raises(MemoryNotFoundError):
        await client.edit_long_term_memory("no-such-memory", {"text": "x"})
    # Null leaves a field as it is (the fuzzer found a 500 here: a type cannot be unset).
    nulls = await client._client.patch(
        f"/v1/long-term-memory/{record.id}",
        json={"memory_type": None, "text": None, "session_id": None},
    )
    assert nulls.status_code == 200, nulls.text
    kept = nulls.json()
    assert kept["memory_type"] == fetched["memory_type"] and kept["session_id"] == "trip"
    assert kept["text"] == "The user's flight leaves at 11"


async def test_forget_by_session_with_dry_run_first(
    client: MemoryAPIClient, http: httpx.Client
) -> None:
    old = datetime.now(UTC) - timedelta(days=40)
    records = [
        ClientMemoryRecord(text="Old note about the kickoff", session_id="a", created_at=old),
        ClientMemoryRecord(text="Fresh note about the launch", session_id="a"),
        ClientMemoryRecord(text="Note from another session", session_id="b"),
    ]
    await client.create_long_term_memory(records)
    wait_until(lambda: _count(http) == 3, "three memories to be recallable")

    by_age = await client.forget_long_term_memories(ForgetPolicy(max_age_days=30), dry_run=True)
    assert by_age.dry_run and by_age.deleted_ids == [records[0].id] and by_age.scanned == 3
    _sentinel(http)
    assert _count(http) == 4  # a dry run forgets nothing

    session = await client.forget_long_term_memories(ForgetPolicy(budget=0), session_id="a")
    assert sorted(session.deleted_ids) == sorted([records[0].id, records[1].id])
    assert not session.dry_run and session.scanned == 2
    wait_until(lambda: _count(http) == 2, "session a's memories to go")
    assert (await client.get_long_term_memory(records[2].id)).session_id == "b"


async def test_another_tenants_key_sees_none_of_it(
    client: MemoryAPIClient, http: httpx.Client, env: dict[str, str], server: str, tenant: str
) -> None:
    record = ClientMemoryRecord(text="Acme's launch code name is Bluebird")
    await client.create_long_term_memory([record])
    wait_until(lambda: _count(http) == 1, "the memory to be recallable")

    other = new_tenant("globex")
    async with ams_client(server, tenant_key(env, other)) as globex:
        assert (await globex.search_long_term_memory("launch code name")).total == 0
        with pytest.raises(MemoryNotFoundError):
            await globex.get_long_term_memory(record.id)
        with pytest.raises(MemoryServerError) as refused:
            await globex.search_long_term_memory("launch", namespace=Namespace(eq=tenant))
        assert refused.value.status_code == 403
        with pytest.raises(MemoryServerError) as refused:
            await globex.create_long_term_memory(
                [ClientMemoryRecord(text="planted", namespace=tenant)]
            )
        assert refused.value.status_code == 403
        await globex.delete_long_term_memories([record.id])  # deletes in globex: nothing
    _sentinel(http)
    assert _count(http) == 2 and (await client.get_long_term_memory(record.id)).text

    async with ams_client(server, tenant_key(env, None)) as admin:
        seen = await admin.search_long_term_memory("launch", namespace=Namespace(eq=tenant))
        assert [m.id for m in seen.memories][:1] == [record.id]
        with pytest.raises(MemoryServerError) as unnamed:
            await admin.search_long_term_memory("launch")
        assert unnamed.value.status_code == 422
