"""Redis Agent Memory's namespace resources through its own SDK (`redis-agent-memory` 0.4.1,
unmodified) against `memstream serve` on the real stack: roots, children and paths; names
unique among siblings, also for requests racing for one; renames that move every path below;
archiving; removal of empty leaves only; memories and sessions placed in a namespace, answered
with its path, filtered by it and moved; another store seeing none of it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from redis_agent_memory import AgentMemory, errors, models

from .helpers import wait_until
from .serving import new_tenant, tenant_key

pytestmark = pytest.mark.integration


@pytest.fixture
def store(server: str, key: str, tenant: str) -> Iterator[AgentMemory]:
    with AgentMemory(server_url=server, api_key=key, store_id=tenant) as sdk:
        yield sdk


def _create(store: AgentMemory, **request: Any) -> models.Namespace:
    return store.create_namespace(request=request).namespace


def _paths(page: models.ListNamespacesResponseContent) -> list[str]:
    return [n.path for n in page.items]


def test_a_hierarchy_of_roots_children_and_paths(store: AgentMemory) -> None:
    acme = _create(store, name="acme", scope="SHARED")
    assert (acme.path, acme.scope, acme.state, acme.revision) == ("acme", "SHARED", "ACTIVE", 1)
    assert acme.root_id == acme.namespace_id and acme.parent_id is None
    infra = _create(store, name="infra", parentId=acme.namespace_id)
    assert (infra.path, infra.root_id, infra.parent_id) == (
        "acme/infra",
        acme.namespace_id,
        acme.namespace_id,
    )
    db = _create(store, path="acme/infra/db")  # the segments there are used as they are
    assert db.path == "acme/infra/db" and db.parent_id == infra.namespace_id
    made = _create(store, path="tools/ci")  # missing segments are created
    assert made.path == "tools/ci"

    # Names are unique among siblings (a taken last segment of a path too); personal roots per
    # owner; the request says what was wrong.
    for taken in ({"name": "infra", "parentId": acme.namespace_id}, {"path": "acme/infra"}):
        with pytest.raises(errors.ConflictErrorResponseContent) as conflict:
            _create(store, **taken)
        assert "infra" in (conflict.value.data.detail or "")
    with pytest.raises(errors.BadRequestErrorResponseContent) as bad:
        _create(store, name="mine", scope="PERSONAL")
    assert "ownerId" in (bad.value.data.detail or "")
    with pytest.raises(errors.BadRequestErrorResponseContent):
        _create(store, name="a/b", scope="SHARED")
    with pytest.raises(errors.NotFoundErrorResponseContent):
        _create(store, name="orphan", parentId="no-such-namespace")
    alices = _create(store, name="mine", scope="PERSONAL", ownerId="alice")
    _create(store, name="mine", scope="PERSONAL", ownerId="bob")
    assert alices.owner_id == "alice"

    assert _paths(store.list_namespaces()) == ["acme", "mine", "mine", "tools"]
    assert _paths(store.list_namespaces(scope="SHARED")) == ["acme", "tools"]
    personal = store.list_namespaces(scope="PERSONAL", owner_id="alice")
    assert [n.owner_id for n in personal.items] == ["alice"]
    assert _paths(store.list_namespaces(parent_id=infra.namespace_id)) == ["acme/infra/db"]
    first = store.list_namespaces(limit=3)
    assert len(first.items) == 3 and first.next_page_token is not None
    rest = store.list_namespaces(limit=3, page_token=first.next_page_token)
    assert _paths(rest) == ["tools"] and rest.next_page_token is None

    # A rename moves every path below it; its revision goes up.
    renamed = store.update_namespace(namespace_id=infra.namespace_id, name="platform").namespace
    assert (renamed.path, renamed.revision) == ("acme/platform", 2)
    assert store.get_namespace(namespace_id=db.namespace_id).namespace.path == "acme/platform/db"
    ops = _create(store, name="ops", parentId=acme.namespace_id)
    with pytest.raises(errors.ConflictErrorResponseContent):  # a sibling has that name
        store.update_namespace(namespace_id=ops.namespace_id, name="platform")
    store.delete_namespace(namespace_id=ops.namespace_id)

    # Archived: kept as it is, takes no children; removal only of an empty leaf.
    archived = store.update_namespace(namespace_id=db.namespace_id, state="ARCHIVED").namespace
    assert archived.state == "ARCHIVED" and archived.revision == 2
    with pytest.raises(errors.ConflictErrorResponseContent):
        _create(store, name="x", parentId=db.namespace_id)
    with pytest.raises(errors.ConflictErrorResponseContent):
        store.update_namespace(namespace_id=db.namespace_id, name="database")
    with pytest.raises(errors.ConflictErrorResponseContent) as busy:
        store.delete_namespace(namespace_id=infra.namespace_id)
    assert "children" in (busy.value.data.detail or "")
    store.delete_namespace(namespace_id=db.namespace_id)
    store.delete_namespace(namespace_id=infra.namespace_id)  # a leaf now
    with pytest.raises(errors.NotFoundErrorResponseContent):
        store.get_namespace(namespace_id=infra.namespace_id)
    assert _paths(store.list_namespaces(parent_id=acme.namespace_id)) == []
    # Its name is free again.
    assert _create(store, name="infra", parentId=acme.namespace_id).path == "acme/infra"


def test_requests_racing_for_one_name_make_one_namespace(store: AgentMemory) -> None:
    root = _create(store, name="race", scope="SHARED")

    def attempt(_: int) -> str:
        try:
            _create(store, name="same", parentId=root.namespace_id)
            return "made"
        except errors.ConflictErrorResponseContent:
            return "conflict"

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(attempt, range(8)))
    assert outcomes.count("made") == 1 and outcomes.count("conflict") == 7
    assert _paths(store.list_namespaces(parent_id=root.namespace_id)) == ["race/same"]


def test_memories_and_sessions_placed_in_a_namespace(
    server: str, env: dict[str, str], store: AgentMemory
) -> None:
    team = _create(store, path="acme/team")
    placed, loose = f"m-{uuid.uuid4().hex[:10]}", f"m-{uuid.uuid4().hex[:10]}"
    created = store.bulk_create_long_term_memories(
        memories=[
            {
                "id": placed,
                "text": "The team deploys on Tuesdays",
                "ownerId": "al",
                "namespaceRef": {"namespaceId": team.namespace_id},
            },
            {"id": loose, "text": "Lunch is at noon", "ownerId": "al"},
            {
                "id": "m-nowhere",
                "text": "Placed in a namespace the store does not have",
                "ownerId": "al",
                "namespaceRef": {"namespaceId": "no-such-namespace"},
            },
        ]
    )
    assert sorted(created.created) == sorted([placed, loose])
    assert [e.id for e in created.errors or []] == ["m-nowhere"]
    wait_until(lambda: len(store.search_long_term_memory(request={}).items) == 2, "both found")
    got = store.get_long_term_memory(memory_id=placed)
    assert got.namespace_ref is not None and got.namespace_ref.path == "acme/team"

    def found(**where: Any) -> list[str]:
        page = store.search_long_term_memory(request={"filter": where, "limit": 10})
        return sorted(m.id for m in page.items)

    assert found(namespaceRef={"eq": team.namespace_id}) == [placed]
    assert found(unnamespaced=True) == [loose]

    # Moved: into the namespace, answered with its path; a namespace holding memories stays.
    moved = store.move_long_term_memories(
        memory_ids=[loose, "m-missing"], namespace_ref={"namespaceId": team.namespace_id}
    )
    assert moved.moved == [loose] and [e.id for e in moved.errors or []] == ["m-missing"]
    wait_until(lambda: found(namespaceRef={"eq": team.namespace_id}) == sorted([placed, loose]),
               "the moved memory in its namespace")  # fmt: skip
    with pytest.raises(errors.ConflictErrorResponseContent) as holds:
        store.delete_namespace(namespace_id=team.namespace_id)
    assert "memories" in (holds.value.data.detail or "")
    store.update_namespace(namespace_id=team.namespace_id, name="crew")
    renamed = store.get_long_term_memory(memory_id=loose)
    assert renamed.namespace_ref is not None and renamed.namespace_ref.path == "acme/crew"

    # A session event placed in it; an archived namespace takes nothing more.
    store.add_session_event(
        session_id="standup",
        actor_id="al",
        role=models.MessageRole.USER,
        content=[{"text": "Standup moved to ten"}],
        created_at=datetime.now(UTC),
        namespace_ref={"namespaceId": team.namespace_id},
    )
    session = store.get_session_memory(session_id="standup")
    assert session.namespace_ref is not None and session.namespace_ref.path == "acme/crew"
    store.update_namespace(namespace_id=team.namespace_id, state="ARCHIVED")
    with pytest.raises(errors.ConflictErrorResponseContent):
        store.move_long_term_memories(
            memory_ids=[placed], namespace_ref={"namespaceId": team.namespace_id}
        )

    # Another store has none of it, and cannot reach it.
    other = new_tenant("globex")
    with AgentMemory(server_url=server, api_key=tenant_key(env, other), store_id=other) as theirs:
        assert theirs.list_namespaces().items == []
        with pytest.raises(errors.NotFoundErrorResponseContent):
            theirs.get_namespace(namespace_id=team.namespace_id)
        with pytest.raises(errors.NotFoundErrorResponseContent):
            theirs.move_long_term_memories(
                memory_ids=[placed], namespace_ref={"namespaceId": team.namespace_id}
            )
