"""Redis Agent Memory's store API through its own SDK (`redis-agent-memory` 0.4.1, unmodified)
against a running `memstream serve` on the real stack: every operation the SDK has, a store
being a tenant (another tenant's store refused, nothing of it seen), session events recorded
through the log and recallable as long-term memory, filters, paging and problem details.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from redis_agent_memory import AgentMemory, errors, models

from .helpers import wait_until
from .serving import new_tenant, tenant_key

pytestmark = pytest.mark.integration


@pytest.fixture
def store(server: str, key: str, tenant: str) -> Iterator[AgentMemory]:
    """The SDK as its users make it: one client a store, the tenant's key its API key."""
    with AgentMemory(server_url=server, api_key=key, store_id=tenant) as sdk:
        yield sdk


def _texts(store: AgentMemory, **search: Any) -> list[str]:
    found = store.search_long_term_memory(request={"limit": 100, **search})
    return sorted(m.text for m in found.items)


def _mid() -> str:
    return f"m-{uuid.uuid4().hex[:12]}"


def test_health_answers_without_a_key_and_a_store_with_its_key(
    server: str, store: AgentMemory, tenant: str
) -> None:
    with AgentMemory(server_url=server) as anonymous:
        assert anonymous.health().status == models.HealthStatus.HEALTHY
    health = store.store_health()
    assert health.status == "healthy"
    assert set(health.features) == {"sessionMemory", "longTermMemory"}


def test_long_term_memory_create_get_search_update_and_delete(
    store: AgentMemory, tenant: str
) -> None:
    first, second, third = _mid(), _mid(), _mid()
    created = store.bulk_create_long_term_memories(
        memories=[
            {
                "id": first,
                "text": "The team deploys to production on Tuesdays",
                "ownerId": "alice",
                "sessionId": "s-1",
                "topics": ["Deploys"],
                "attributes": {"team": "platform", "weight": 3, "oncall": True},
            },
            {"id": second, "text": "Invoices go to billing at acme dot example", "ownerId": "bob"},
            {
                "id": third,
                "text": "The database is PostgreSQL 16",
                "ownerId": "alice",
                "memoryType": "EPISODIC",
                "namespace": "infra",
            },
        ],
    )
    assert sorted(created.created) == sorted([first, second, third])
    assert created.errors is None
    wait_until(lambda: len(_texts(store)) == 3, "three memories searchable")

    got = store.get_long_term_memory(memory_id=first)
    assert (got.text, got.owner_id, got.session_id) == (
        "The team deploys to production on Tuesdays",
        "alice",
        "s-1",
    )
    assert got.topics == ["Deploys"] and got.memory_type == "semantic"
    assert got.attributes == {"team": "platform", "weight": 3, "oncall": True}

    # The one ranking: the deploy memory first for a deploy question.
    found = store.search_long_term_memory(request={"text": "when do we deploy?", "limit": 2})
    assert found.items[0].id == first

    # Filters: owner, memory type (any case), topics (any case), namespace label, attributes.
    owned = {"filter": {"ownerId": {"eq": "alice"}}}
    assert _texts(store, **owned) == [
        "The database is PostgreSQL 16",
        "The team deploys to production on Tuesdays",
    ]
    assert _texts(store, filter={"memoryType": {"eq": "Episodic"}}) == [
        "The database is PostgreSQL 16"
    ]
    assert _texts(store, filter={"topics": {"in": ["deploys"]}}) == [
        "The team deploys to production on Tuesdays"
    ]
    assert _texts(store, filter={"namespace": {"eq": "INFRA"}}) == ["The database is PostgreSQL 16"]
    assert _texts(store, filter={"unnamespaced": True}) == [
        "Invoices go to billing at acme dot example",
        "The team deploys to production on Tuesdays",
    ]
    attrs = {"attributes": {"weight": {"number": 3}, "oncall": {"boolean": True}}}
    assert _texts(store, filter=attrs) == ["The team deploys to production on Tuesdays"]
    either = {"ownerId": {"eq": "bob"}, "namespace": {"eq": "infra"}}
    assert _texts(store, filter=either, filterOp="any") == [
        "Invoices go to billing at acme dot example",
        "The database is PostgreSQL 16",
    ]
    assert _texts(store, filter=either) == []  # all of them: none is both

    # Paging with the opaque token: every memory once.
    seen: list[str] = []
    token: str | None = None
    for _ in range(3):
        body: dict[str, object] = {"limit": 1}
        if token:
            body["pageToken"] = token
        page = store.search_long_term_memory(request=body)
        seen += [m.id for m in page.items]
        token = page.next_page_token
    assert sorted(seen) == sorted([first, second, third]) and token is None

    updated = store.update_long_term_memory(
        memory_id=second, text="Invoices go to ap at acme dot example"
    )
    assert updated.text == "Invoices go to ap at acme dot example" and updated.owner_id == "bob"
    store.update_long_term_memory_fields(
        memory_id=first, memory_type="semantic", attributes={"weight": 4}
    )

    def edited() -> bool:
        one = store.get_long_term_memory(memory_id=first)
        two = store.get_long_term_memory(memory_id=second)
        return (one.attributes or {}).get("weight") == 4 and two.text.startswith(
            "Invoices go to ap"
        )

    wait_until(edited, "both edits applied")
    kept = store.get_long_term_memory(memory_id=first)
    assert kept.attributes == {"team": "platform", "weight": 4, "oncall": True}
    with pytest.raises(errors.BadRequestErrorResponseContent, match="of type semantic"):
        store.update_long_term_memory_fields(memory_id=first, memory_type="episodic", text="x")

    gone = store.bulk_delete_long_term_memories(memory_ids=[first, "never-held"])
    assert gone.deleted == [first]
    assert gone.errors is not None and [e.id for e in gone.errors] == ["never-held"]
    wait_until(lambda: len(_texts(store)) == 2, "the deleted memory gone")
    with pytest.raises(errors.NotFoundErrorResponseContent) as missing:
        store.get_long_term_memory(memory_id=first)
    assert missing.value.data.type == models.NotFoundErrorType.ROOT_ERRORS_RESOURCE_NOT_FOUND

    # A deleted id is never used again: named in `errors`, the others still written.
    again = store.bulk_create_long_term_memories(
        memories=[
            {"id": first, "text": "deploys moved to Wednesdays", "ownerId": "alice"},
            {"id": _mid(), "text": "lunch is at noon", "ownerId": "alice"},
            {"id": _mid(), "text": "custom", "ownerId": "alice", "memoryType": "recipe"},
        ],
    )
    assert len(again.created) == 1
    assert again.errors is not None and len(again.errors) == 2
    reasons = " ".join(e.error for e in again.errors)
    assert "deleted before" in reasons and "recipe" in reasons


def test_session_events_are_recorded_and_recallable_as_long_term_memory(
    store: AgentMemory, tenant: str
) -> None:
    at = datetime(2026, 12, 5, 9, 30, tzinfo=UTC)
    opened = store.add_session_event(
        actor_id="alice",
        role=models.MessageRole.USER,
        content=[{"text": "My cat is called Miso."}, {"text": "She is four."}],
        created_at=at,
        metadata={"channel": "web"},
    )
    session = opened.event.session_id
    assert session and opened.event.actor_id == "alice"
    reply = store.add_session_event(
        session_id=session,
        actor_id="assistant-1",
        role=models.MessageRole.ASSISTANT,
        content=[{"text": "Noted: Miso, four years old."}],
        created_at=at,
    )
    memory = store.get_session_memory(session_id=session)
    assert memory.owner_id == "alice"
    assert [e.event_id for e in memory.events] == [opened.event.event_id, reply.event.event_id]
    first = memory.events[0]
    assert [p.text for p in first.content] == ["My cat is called Miso.", "She is four."]
    assert first.metadata == {"channel": "web"} and first.role == models.MessageRole.USER
    assert first.created_at == at and first.system_timestamp >= at

    one = store.get_session_event(session_id=session, event_id=reply.event.event_id)
    assert one.event.actor_id == "assistant-1"

    listed = store.list_sessions(include_all=True)
    assert session in listed.items and listed.total >= 1
    assert session in store.list_sessions(filter_owner_id="alice").items
    assert store.list_sessions(filter_owner_id="bob").items == []
    with pytest.raises(errors.BadRequestErrorResponseContent):
        store.list_sessions()  # neither a filter nor includeAll

    # The exchange went through the log as a turn: long-term memory finds it.
    wait_until(
        lambda: any("Miso" in t for t in _texts(store, text="what is the cat called?")),
        "the session's exchange recallable as long-term memory",
    )

    store.delete_session_event(session_id=session, event_id=reply.event.event_id)
    left = store.get_session_memory(session_id=session)
    assert [e.event_id for e in left.events] == [opened.event.event_id]
    with pytest.raises(errors.NotFoundErrorResponseContent):
        store.get_session_event(session_id=session, event_id=reply.event.event_id)

    store.delete_session_memory(session_id=session)
    with pytest.raises(errors.NotFoundErrorResponseContent):
        store.get_session_memory(session_id=session)
    # What the session recorded stays long-term.
    assert any("Miso" in t for t in _texts(store, text="cat"))


def test_a_store_is_a_tenant_and_another_store_is_refused(
    server: str, env: dict[str, str], store: AgentMemory, key: str, tenant: str
) -> None:
    other = new_tenant("globex")
    with AgentMemory(server_url=server, api_key=tenant_key(env, other), store_id=other) as theirs:
        theirs.bulk_create_long_term_memories(
            memories=[{"id": _mid(), "text": "globex secret: the vault code", "ownerId": "eve"}]
        )
        theirs.add_session_event(
            session_id="globex-s",
            actor_id="eve",
            role=models.MessageRole.USER,
            content=[{"text": "globex secret plan"}],
            created_at=datetime.now(UTC),
        )
        wait_until(lambda: len(_texts(theirs)) >= 1, "globex's memory searchable")
    store.bulk_create_long_term_memories(
        memories=[{"id": _mid(), "text": "acme's own note", "ownerId": "al"}]
    )
    wait_until(lambda: len(_texts(store)) == 1, "acme's memory searchable")
    # acme's key, pointed at globex's store: every operation refused.
    with AgentMemory(server_url=server, api_key=key, store_id=other) as trespass:
        calls = [
            lambda: trespass.search_long_term_memory(request={"text": "secret"}),
            lambda: trespass.get_session_memory(session_id="globex-s"),
            lambda: trespass.list_sessions(include_all=True),
            lambda: trespass.store_health(),
            lambda: trespass.bulk_delete_long_term_memories(memory_ids=["x"]),
            lambda: trespass.list_namespaces(),
        ]
        for call in calls:
            with pytest.raises(errors.ForbiddenErrorResponseContent) as refused:
                call()
            kind = refused.value.data.type
            assert kind == models.ForbiddenErrorType.ROOT_ERRORS_INSUFFICIENT_PERMISSIONS
    assert _texts(store, text="globex secret vault") == ["acme's own note"]
    with pytest.raises(errors.NotFoundErrorResponseContent):
        store.get_session_memory(session_id="globex-s")
    stranger = AgentMemory(server_url=server, api_key="msk_not-a-key", store_id=tenant)
    with stranger, pytest.raises(errors.AuthenticationErrorResponseContent):
        stranger.store_health()


def test_bad_input_is_a_problem_that_says_what_was_wrong(
    server: str, env: dict[str, str], store: AgentMemory, tenant: str, key: str
) -> None:
    with pytest.raises(errors.BadRequestErrorResponseContent) as bad:
        store.bulk_create_long_term_memories(memories=[{"id": _mid(), "text": "", "ownerId": "al"}])
    assert bad.value.data.type == models.BadRequestErrorType.ROOT_ERRORS_INVALID_DATA
    assert "text" in (bad.value.data.detail or "")
    with pytest.raises(errors.BadRequestErrorResponseContent) as token:
        store.search_long_term_memory(request={"text": "x", "pageToken": "garbage"})
    assert "pageToken" in (token.value.data.detail or "")
    admin = tenant_key(env, None)
    bad_store = AgentMemory(server_url=server, api_key=admin, store_id="x" * 300)
    with bad_store, pytest.raises(errors.BadRequestErrorResponseContent):
        bad_store.store_health()
    # A namespace the store does not have: a 404 problem naming it.
    response = httpx.get(
        f"{server}/v1/stores/{tenant}/namespaces/nope", headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 404
    assert response.json()["type"] == "/errors/resource-not-found"
    assert "nope" in response.json()["detail"]
