"""LangMem's memory tools on MemstreamStore, with LangMem's own namespace convention.

LangMem's tools keep memories under ("memories", "{langgraph_user_id}"): the user is the second
label. With the tenant read from that label, every user is a tenant of their own, so two users
never see each other's memories, through LangMem's search or memstream's recall.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langmem import create_manage_memory_tool, create_search_memory_tool

from memstream.deployment import Deployment
from memstream.integrations.langgraph import MemstreamStore
from memstream.integrations.namespaces import NamespaceTenants

from .helpers import TestStack

pytestmark = pytest.mark.integration

NAMESPACE = ("memories", "{langgraph_user_id}")


@pytest.fixture
def store(stack: TestStack) -> Iterator[MemstreamStore]:
    store = MemstreamStore(
        Deployment(stack.settings),
        tenants=NamespaceTenants((1,)),
        read_your_writes=True,
    )
    yield store
    store.close()


def user(name: str) -> RunnableConfig:
    return {"configurable": {"langgraph_user_id": name}}


def created_id(reply: str) -> str:
    match = re.search(r"memory ([0-9a-f-]{36})", reply)
    assert match, reply
    return match.group(1)


def found(reply: Any) -> list[dict[str, Any]]:
    return json.loads(reply)  # type: ignore[no-any-return]


@pytest.mark.parametrize("labels", [(1,), (0, 1)], ids=["user-label", "default-mapping"])
def test_two_users_never_see_each_other(stack: TestStack, labels: tuple[int, ...]) -> None:
    tenants = NamespaceTenants(labels)
    store = MemstreamStore(Deployment(stack.settings), tenants=tenants, read_your_writes=True)
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)
    alice, bob = f"lm-alice-{len(labels)}", f"lm-bob-{len(labels)}"
    manage.invoke({"content": "Alice's favourite colour is teal"}, config=user(alice))
    manage.invoke({"content": "Bob's favourite colour is crimson"}, config=user(bob))

    seen_by_alice = found(search.invoke({"query": "favourite colour"}, config=user(alice)))
    seen_by_bob = found(search.invoke({"query": "favourite colour"}, config=user(bob)))
    assert [m["value"]["content"] for m in seen_by_alice] == ["Alice's favourite colour is teal"]
    assert [m["value"]["content"] for m in seen_by_bob] == ["Bob's favourite colour is crimson"]
    assert seen_by_alice[0]["namespace"] == ["memories", alice]

    # Each user is a tenant of their own: memstream's recall of Alice's tenant holds only hers.
    tenant = tenants.tenant_of(("memories", alice))
    assert tenant == (alice if labels == (1,) else f"memories.{alice}")
    recalled = [h.memory.content for h in stack.recaller().recall(tenant, "colour", k=10)]
    assert any("teal" in text for text in recalled)
    assert not any("crimson" in text for text in recalled)
    store.close()


def test_update_and_delete_through_the_manage_tool(store: MemstreamStore) -> None:
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)
    carol = user("lm-carol")
    memory_id = created_id(manage.invoke({"content": "Carol lives in Lyon"}, config=carol))
    manage.invoke(
        {"content": "Carol moved to Porto", "action": "update", "id": memory_id}, config=carol
    )
    hits = found(search.invoke({"query": "where does Carol live"}, config=carol))
    assert [(m["key"], m["value"]["content"]) for m in hits] == [
        (memory_id, "Carol moved to Porto")
    ]
    manage.invoke({"action": "delete", "id": memory_id}, config=carol)
    assert found(search.invoke({"query": "where does Carol live"}, config=carol)) == []
    assert store.get(("memories", "lm-carol"), memory_id) is None


async def test_async_tools(store: MemstreamStore) -> None:
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)
    dave = user("lm-dave")
    await manage.ainvoke({"content": "Dave drinks oolong tea"}, config=dave)
    hits = found(await search.ainvoke({"query": "tea"}, config=dave))
    assert [m["value"]["content"] for m in hits] == ["Dave drinks oolong tea"]
    assert found(await search.ainvoke({"query": "tea"}, config=user("lm-erin"))) == []
