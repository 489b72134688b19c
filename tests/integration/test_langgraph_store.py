"""MemstreamStore against LangGraph's InMemoryStore as the oracle, on the real stack.

Every case runs the same operations on both stores and compares what they return, scores
aside. The cases are named after LangGraph's own store tests (libs/checkpoint/tests/
test_store.py). The oracle embeds with the same model as memstream, so a vector search ranks
the same way; memstream's search is hybrid (BM25 fused with vectors), so where a query ranks,
the comparison is of the items found, not of their order.

The store here reads its tenant from the first label and waits for its writes to be applied
(read-your-writes), so each operation sees the ones before it, as on InMemoryStore. Each case
deletes what it put, so the next one starts from an empty store.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, InvalidNamespaceError, Item, PutOp
from langgraph.store.memory import InMemoryStore

from memstream import Settings
from memstream.deployment import Deployment
from memstream.errors import NamespaceTenantError
from memstream.integrations.langgraph import MemstreamStore
from memstream.integrations.namespaces import NamespaceTenants
from memstream.memory.embeddings import Embedder
from memstream.memory.events import ItemStored, item_memory_id
from memstream.projections.schema import VectorType
from memstream.providers import embedder_from_settings

from .commands import memstream
from .helpers import TestStack, wait_until

pytestmark = pytest.mark.integration


class SameEmbeddings(Embeddings):
    """memstream's embedder as LangChain Embeddings, for the oracle."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self._embedder.embed_documents(texts)]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self._embedder.embed_query(text)]


def view(item: Item | None) -> tuple[tuple[str, ...], str, dict[str, Any]] | None:
    return None if item is None else (item.namespace, item.key, item.value)


def canonical(found: Any) -> str:
    return json.dumps(found, sort_keys=True, ensure_ascii=False)


class Pair:
    """The oracle and the store under test, driven together."""

    def __init__(self, oracle: InMemoryStore, subject: MemstreamStore) -> None:
        self.oracle = oracle
        self.subject = subject
        self.stores: tuple[BaseStore, BaseStore] = (oracle, subject)
        self.written: set[tuple[tuple[str, ...], str]] = set()

    def put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any], **kw: Any) -> None:
        for store in self.stores:
            store.put(namespace, key, value, **kw)
        self.written.add((namespace, key))

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        for store in self.stores:
            store.delete(namespace, key)

    def get(self, namespace: tuple[str, ...], key: str) -> Any:
        expected, actual = (view(s.get(namespace, key)) for s in self.stores)
        assert actual == expected
        return actual

    def list(self, **kw: Any) -> list[tuple[str, ...]]:
        expected, actual = (s.list_namespaces(**kw) for s in self.stores)
        assert actual == expected, kw
        return actual

    def search(self, prefix: tuple[str, ...], **kw: Any) -> list[Any]:
        """Unranked: the same items in the same order. Ranked: the same items."""
        expected, actual = ([view(i) for i in s.search(prefix, **kw)] for s in self.stores)
        if kw.get("query"):
            assert sorted(map(canonical, actual)) == sorted(map(canonical, expected)), kw
        else:
            assert actual == expected, kw
        return actual

    def clear(self) -> None:
        for namespace, key in self.written:
            self.subject.delete(namespace, key)


@pytest.fixture(scope="module")
def embedder(settings: Settings) -> Embedder:
    return embedder_from_settings(settings)


@pytest.fixture(scope="module")
def deployment(settings: Settings, embedder: Embedder) -> Iterator[Deployment]:
    deployment = Deployment(settings, embedder=embedder)
    yield deployment
    deployment.close()


@pytest.fixture
def pair(stack: TestStack, deployment: Deployment, embedder: Embedder) -> Iterator[Pair]:
    oracle = InMemoryStore(
        index={"dims": embedder.dims, "embed": SameEmbeddings(embedder), "fields": ["$"]}
    )
    subject = MemstreamStore(deployment, tenants=NamespaceTenants((0,)), read_your_writes=True)
    pair = Pair(oracle, subject)
    yield pair
    pair.clear()


def put_all(pair: Pair, namespaces: Sequence[tuple[str, ...]]) -> None:
    for i, namespace in enumerate(namespaces):
        pair.put(namespace, f"id_{i}", {"data": f"value_{i:02d}"})


def test_list_namespaces_basic(pair: Pair) -> None:
    put_all(
        pair,
        [
            ("a", "b", "c"),
            ("a", "b", "d", "e"),
            ("a", "b", "d", "i"),
            ("a", "b", "f"),
            ("a", "c", "f"),
            ("b", "a", "f"),
            ("users", "123"),
            ("users", "456", "settings"),
            ("admin", "users", "789"),
        ],
    )
    assert len(pair.list(prefix=("a", "b"))) == 4
    assert pair.list(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    pair.list(prefix=("a",), suffix=("f",))
    assert pair.list(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    pair.list(prefix=("a", "b"), limit=2)
    pair.list(prefix=("a", "b"), offset=2)
    pair.list(prefix=("a", "*", "f"))
    pair.list(suffix=("*", "f"))
    assert pair.list(prefix=("nonexistent",)) == []
    assert pair.list(prefix=("users", "123")) == [("users", "123")]


def test_list_namespaces_with_wildcards(pair: Pair) -> None:
    put_all(
        pair,
        [
            ("users", "123"),
            ("users", "456"),
            ("users", "789", "settings"),
            ("admin", "users", "789"),
            ("guests", "123"),
            ("guests", "456", "preferences"),
        ],
    )
    assert len(pair.list(prefix=("users", "*"))) == 3
    assert pair.list(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert pair.list(prefix=("*", "users"), suffix=("*", "settings")) == []


def test_list_namespaces_pagination(pair: Pair) -> None:
    for i in range(20):
        pair.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": f"value_{i:02d}"})
    for offset in (0, 5, 15):
        page = pair.list(prefix=("namespace",), limit=5, offset=offset)
        assert page == [("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]


def test_list_namespaces_max_depth(pair: Pair) -> None:
    put_all(
        pair,
        [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"), ("h", "i", "j")],
    )
    assert pair.list(max_depth=2) == [("a", "b"), ("a", "g"), ("h", "i")]


def test_list_namespaces_no_conditions(pair: Pair) -> None:
    put_all(pair, [("a", "b"), ("c", "d"), ("e", "f", "g")])
    assert pair.list() == [("a", "b"), ("c", "d"), ("e", "f", "g")]


def test_list_namespaces_empty_store(pair: Pair) -> None:
    assert pair.list() == []
    assert pair.search(("test",)) == []
    assert pair.get(("test",), "nothing") is None


async def test_cannot_put_empty_namespace(pair: Pair) -> None:
    doc = {"foo": "bar"}
    for store in pair.stores:
        for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
            with pytest.raises(InvalidNamespaceError):
                store.put(bad, "foo", doc)
            with pytest.raises(InvalidNamespaceError):
                await store.aput(bad, "foo", doc)
    # Past the public API, an empty namespace names no tenant: refused, nothing written.
    with pytest.raises(NamespaceTenantError, match="needs at least 1"):
        pair.subject.batch([PutOp((), "foo", doc)])
    pair.put(("foo", "langgraph", "foo"), "bar", doc)
    assert pair.get(("foo", "langgraph", "foo"), "bar") == (("foo", "langgraph", "foo"), "bar", doc)
    assert pair.search(("foo", "langgraph", "foo"))[0][2] == doc
    pair.delete(("foo", "langgraph", "foo"), "bar")
    assert pair.get(("foo", "langgraph", "foo"), "bar") is None


def test_put_overwrite_and_put_after_delete(pair: Pair) -> None:
    pair.put(("docs",), "k", {"v": 1})
    pair.put(("docs",), "k", {"v": 2})
    assert pair.get(("docs",), "k") == (("docs",), "k", {"v": 2})
    assert len(pair.search(("docs",))) == 1
    pair.delete(("docs",), "k")
    assert pair.get(("docs",), "k") is None
    # A put after a delete writes again: the slot's tombstone guards only earlier puts.
    pair.put(("docs",), "k", {"v": 3})
    assert pair.get(("docs",), "k") == (("docs",), "k", {"v": 3})


def test_vector_insert_with_auto_embedding(pair: Pair) -> None:
    docs = [
        ("doc1", {"text": "short text"}),
        ("doc2", {"text": "longer text document"}),
        ("doc3", {"text": "longest text document here"}),
        ("doc4", {"description": "text in description field"}),
        ("doc5", {"content": "text in content field"}),
        ("doc6", {"body": "text in body field"}),
    ]
    for key, value in docs:
        pair.put(("test",), key, value)
    found = pair.search(("test",), query="long text")
    assert {"doc2", "doc3"} <= {key for _, key, _ in found}


def test_vector_update_with_embedding(pair: Pair) -> None:
    pair.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
    pair.put(("test",), "doc2", {"text": "something about dogs"})
    pair.put(("test",), "doc3", {"text": "text about birds"})
    first = pair.subject.search(("test",), query="Zany Xerxes")
    assert first[0].key == "doc1"
    pair.put(("test",), "doc1", {"text": "new text about dogs"})
    after = pair.subject.search(("test",), query="Zany Xerxes")
    assert next(r.score for r in after if r.key == "doc1") < first[0].score  # type: ignore[operator]
    pair.search(("test",), query="new text about dogs")
    # Not indexed: found by get and by unranked search, never ranked by a query.
    pair.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    top = pair.search(("test",), query="new text about dogs", limit=3)
    assert "doc4" not in {key for _, key, _ in top}
    assert pair.get(("test",), "doc4") is not None


def test_items_alike_in_value_are_each_ranked(pair: Pair) -> None:
    # Recall collapses a memory restating a better-ranked one; a store's items are each their
    # own, so its search keeps every one (as InMemoryStore does).
    pair.put(("test",), "a", {"text": "the boiler is serviced in March"})
    pair.put(("test",), "b", {"text": "the boiler is serviced in March"})
    found = pair.subject.search(("test",), query="boiler service")
    assert sorted(r.key for r in found) == ["a", "b"]
    assert all(r.score is not None for r in found)


def test_vector_search_with_filters(pair: Pair) -> None:
    docs = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]
    for key, value in docs:
        pair.put(("test",), key, value)
    assert len(pair.search(("test",), query="apple", filter={"color": "red"})) == 2
    assert len(pair.search(("test",), query="car", filter={"color": "red"})) == 2
    assert len(pair.search(("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}})) == 3
    both = {"score": {"$gte": 4.0}, "color": "green"}
    assert [k for _, k, _ in pair.search(("test",), query="apple", filter=both)] == ["doc3"]
    # Every operator, without a query (order: as put).
    for condition in [
        {"color": {"$eq": "red"}},
        {"color": {"$ne": "red"}},
        {"score": {"$lt": 4.0}},
        {"score": {"$lte": 4.0}},
        {"score": {"$gt": 3.0, "$lt": 4.5}},
    ]:
        assert pair.search(("test",), filter=condition)


def test_vector_search_pagination(pair: Pair) -> None:
    for i in range(5):
        pair.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = pair.subject.search(("test",), query="test", limit=2)
    page2 = pair.subject.search(("test",), query="test", limit=2, offset=2)
    page3 = pair.subject.search(("test",), query="test", limit=2, offset=4)
    keys = [item.key for item in page1 + page2 + page3]
    assert len(page1) == len(page2) == 2 and len(page3) == 1
    assert sorted(keys) == [f"doc{i}" for i in range(5)]  # disjoint pages, nothing lost
    assert len(pair.search(("test",), query="test", limit=10)) == 5
    assert pair.search(("test",), limit=2, offset=1) == [
        (("test",), f"doc{i}", {"text": f"test document number {i}"}) for i in (1, 2)
    ]


def test_vector_search_edge_cases(pair: Pair) -> None:
    pair.put(("test",), "doc1", {"text": "test document"})
    for query in ["", None, "test " * 100, "test!@#$%^&*()"]:
        assert len(pair.search(("test",), query=query)) == 1


def test_non_ascii(pair: Pair) -> None:
    namespace = ("ユーザー", "café", "🙂")
    value = {"text": "Ich mag Käsespätzle und 寿司 🍣", "note": "naïve"}
    pair.put(namespace, "schlüssel", value)
    assert pair.get(namespace, "schlüssel") == (namespace, "schlüssel", value)
    assert pair.search(("ユーザー",), query="寿司 Käsespätzle")[0][2] == value
    assert pair.list(prefix=("ユーザー",)) == [namespace]


async def test_async_twins(pair: Pair) -> None:
    store = pair.subject
    await store.aput(("test",), "a", {"text": "async put"})
    pair.written.add((("test",), "a"))
    item = await store.aget(("test",), "a")
    assert item is not None and item.value == {"text": "async put"}
    assert [i.key for i in await store.asearch(("test",), query="async")] == ["a"]
    assert await store.alist_namespaces(prefix=("test",)) == [("test",)]
    await store.adelete(("test",), "a")
    assert await store.aget(("test",), "a") is None


def test_search_spanning_tenants_is_refused(pair: Pair) -> None:
    with pytest.raises(NamespaceTenantError, match="would span tenants"):
        pair.subject.search((), query="anything")


def test_put_is_durable_on_return_and_recallable_after(
    stack: TestStack, deployment: Deployment
) -> None:
    """Without read-your-writes, a put returns once Kafka has it; a worker applies it soon."""
    store = MemstreamStore(deployment, tenants=NamespaceTenants((0,)))
    before = sum(stack.end_offsets(stack.topics.memory).values())
    store.put(("durable",), "k", {"text": "kept in the log"})
    # Durable on return: the broker already has the event.
    assert sum(stack.end_offsets(stack.topics.memory).values()) == before + 1
    wait_until(lambda: store.get(("durable",), "k") is not None, "the put to be applied")
    hits = stack.recaller().recall("durable", "kept in the log", k=3)
    assert hits and "kept in the log" in hits[0].memory.content
    store.delete(("durable",), "k")


def test_a_redelivered_put_applies_once_and_never_reverts_a_later_one(
    stack: TestStack, deployment: Deployment
) -> None:
    store = MemstreamStore(deployment, tenants=NamespaceTenants((0,)), read_your_writes=True)
    namespace = ("redelivery",)
    first, second = (
        ItemStored(
            tenant="redelivery",
            namespace=namespace,
            key="k",
            put_id=f"put-{n}-{uuid.uuid4().hex}",
            value=json.dumps({"v": n}),
            texts=(f"value {n}",),
            recorded_at=datetime.now(UTC),
            importance=0.5,
            embedding_model=stack.model_id,
        )
        for n in (1, 2)
    )
    stack.publish([first, first, second, first])  # a producer retry, then a late duplicate
    stack.wait_applied([first, second])
    wait_until(lambda: stack.status.unapplied([first]) == [], "the duplicates to be consumed")
    item = store.get(namespace, "k")
    assert item is not None and item.value == {"v": 2}
    assert len(store.search(namespace)) == 1
    store.delete(namespace, "k")


def test_a_rebuild_from_the_log_gives_the_same_items(
    stack: TestStack, deployment: Deployment, env: dict[str, str]
) -> None:
    store = MemstreamStore(deployment, tenants=NamespaceTenants((0,)), read_your_writes=True)
    namespace = ("rebuilt", "items")
    store.put(namespace, "a", {"text": "first value"})
    store.put(namespace, "a", {"text": "second value"})
    store.put(namespace, "b", {"text": "not indexed"}, index=False)
    store.delete(namespace, "b")
    store.put(namespace, "b", {"text": "back again"}, index=False)
    store.put(namespace, "c", {"text": "deleted for good"})
    store.delete(namespace, "c")
    before = [view(i) for i in store.search(namespace)]
    assert [key for _, key, _ in before] == ["a", "b"]  # type: ignore[misc]

    assert memstream(env, "verify", "--tenant", "rebuilt").returncode == 0
    replayed = memstream(env, "replay")
    assert replayed.returncode == 0, replayed.stderr
    assert [view(i) for i in store.search(namespace)] == before
    assert store.get(namespace, "c") is None
    hits = store.search(namespace, query="second value")
    assert [h.key for h in hits] == ["a", "b"] and hits[1].score is None


def test_the_readme_store_example_runs_as_written(
    stack: TestStack, env: dict[str, str], tmp_path: Path
) -> None:
    readme = Path(__file__).resolve().parents[2] / "README.md"
    examples = re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)
    (example,) = [e for e in examples if "MemstreamStore" in e]
    script = tmp_path / "store_example.py"
    script.write_text(example)
    result = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["{'content': 'Alice lives in Porto'}", "['home']"]


def test_index_false_stores_no_text_and_embeds_nothing(
    stack: TestStack, deployment: Deployment
) -> None:
    store = MemstreamStore(deployment, tenants=NamespaceTenants((0,)), read_your_writes=True)
    namespace = ("unindexed",)
    store.put(namespace, "plain", {"text": "kept for get only"}, index=False)
    store.put(namespace, "indexed", {"text": "kept for search too"})
    vectors = {}
    for key in ("plain", "indexed"):
        memory_key = stack.status.live().memory(
            "unindexed", item_memory_id("unindexed", namespace, key)
        )
        content, blob = stack.redis.hmget(memory_key, ["content", "embedding"])
        vectors[key] = (content, VectorType.FLOAT16.read(blob))  # the default type
    assert vectors["plain"][0] == b"" and not vectors["plain"][1].any()
    assert vectors["indexed"][0] and vectors["indexed"][1].any()
    item = store.get(namespace, "plain")
    assert item is not None and item.value == {"text": "kept for get only"}
    for key in ("plain", "indexed"):
        store.delete(namespace, key)
