"""MemstreamStore held to LangGraph's own backend-store tests, on the real stack: per-field
scoring and TTL, ported from libs/checkpoint-postgres/tests/test_store.py (test_embed_with_path,
test_embed_with_path_operation_config, test_scores, test_store_ttl, the omit_expired cases) and
libs/checkpoint-sqlite/tests/test_ttl.py.

Where LangGraph's tests compare with a fake character embedder, these compare with LangGraph's
InMemoryStore embedding with memstream's own model (the oracle), scores included. Where they
sleep past a TTL, these wait, with a deadline, for the item's own deadline to pass, and check the
log-side effects LangGraph has no counterpart for: expiry is an event, a replay keeps it, and an
expiry that a refresh or a new put overtook removes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from langgraph.store.base import TTLConfig
from langgraph.store.memory import InMemoryStore

from memstream import Settings
from memstream.deployment import Deployment
from memstream.integrations.langgraph import MemstreamStore
from memstream.integrations.namespaces import NamespaceTenants
from memstream.memory.embeddings import Embedder
from memstream.memory.events import ItemExpired, item_memory_id
from memstream.memory.model import Memory
from memstream.providers import embedder_from_settings

from .commands import memstream
from .helpers import TestStack, wait_until
from .test_langgraph_store import SameEmbeddings

pytestmark = pytest.mark.integration

SECOND = 1 / 60  # a TTL of one second, in LangGraph's minutes


@pytest.fixture(scope="module")
def embedder(settings: Settings) -> Embedder:
    return embedder_from_settings(settings)


@pytest.fixture(scope="module")
def deployment(settings: Settings, embedder: Embedder, worker: Path) -> Iterator[Deployment]:
    """The session's deployment, with its worker running (the store waits for it)."""
    deployment = Deployment(settings, embedder=embedder)
    yield deployment
    deployment.close()


def tenant() -> str:
    """A tenant of its own per test: the sweeps of one never see another's items."""
    return f"parity-{uuid.uuid4().hex[:8]}"


def stores(
    deployment: Deployment, embedder: Embedder, fields: list[str]
) -> tuple[InMemoryStore, MemstreamStore]:
    oracle = InMemoryStore(
        index={"dims": embedder.dims, "embed": SameEmbeddings(embedder), "fields": fields}
    )
    subject = MemstreamStore(
        deployment,
        tenants=NamespaceTenants((0,)),
        index={"dims": embedder.dims, "embed": "ignored", "fields": fields},
        read_your_writes=True,
    )
    return oracle, subject


def same_ranking(
    oracle: InMemoryStore, subject: MemstreamStore, namespace: tuple[str, ...], query: str
) -> list[tuple[str, float | None]]:
    """The subject's keys and scores for `query`, asserted equal to the oracle's (scores to
    float32's precision, ties in any order)."""
    expected = [(i.key, i.score) for i in oracle.search(namespace, query=query)]
    actual = [(i.key, i.score) for i in subject.search(namespace, query=query)]
    assert sorted(k for k, _ in actual) == sorted(k for k, _ in expected), query
    for (_, want), (_, got) in zip(expected, actual, strict=True):
        assert got == pytest.approx(want, abs=1e-3), (query, expected, actual)
    scores = [score or 0.0 for _, score in expected]
    if all(abs(a - b) > 1e-3 for a, b in pairwise(scores)):
        assert [k for k, _ in actual] == [k for k, _ in expected], (query, expected, actual)
    return actual


def test_embed_with_path(deployment: Deployment, embedder: Embedder) -> None:
    oracle, subject = stores(deployment, embedder, ["key0", "key1", "key3"])
    namespace = (tenant(),)
    doc1 = {"key1": "xxx", "key2": "yyy", "key3": "zzz"}  # two vectors (key0 is absent)
    doc2 = {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"}  # three vectors
    for store in (oracle, subject):
        store.put(namespace, "doc1", doc1)
        store.put(namespace, "doc2", doc2)

    # doc2.key3 and doc1.key1 are both an exact match: the best field wins, equal scores (to
    # the int8 model's noise: a text embedded in another batch differs in the third digit).
    both = same_ranking(oracle, subject, namespace, "xxx")
    exact = both[0][1]
    assert exact is not None and exact == pytest.approx(both[1][1], abs=1e-2)
    # An exact match on one field of several scores as an exact match (one vector of the
    # joined text scored ~0.82 here).
    assert exact > 0.99
    for query, best in (("uuu", "doc2"), ("zzz", "doc1")):
        ranked = same_ranking(oracle, subject, namespace, query)
        assert ranked[0][0] == best and ranked[0][1] == pytest.approx(exact, abs=1e-2)
        assert ranked[1][1] is not None and ranked[1][1] < exact
    # key2 is not indexed: lower than an exact match for both.
    assert all(
        s is not None and s < exact for _, s in same_ranking(oracle, subject, namespace, "www")
    )
    for key in ("doc1", "doc2"):
        subject.delete(namespace, key)


def test_embed_with_path_operation_config(deployment: Deployment, embedder: Embedder) -> None:
    oracle, subject = stores(deployment, embedder, ["key17"])  # matches none of the data
    namespace = (tenant(),)
    doc3 = {"key0": "aaa", "key1": "bbb", "key2": "ccc", "key3": "ddd"}
    doc4 = {"key0": "eee", "key1": "bbb", "key2": "fff", "key3": "ggg"}
    for store in (oracle, subject):
        store.put(namespace, "doc3", doc3, index=["key0", "key1"])
        store.put(namespace, "doc4", doc4, index=["key1", "key3"])

    assert same_ranking(oracle, subject, namespace, "aaa")[0][0] == "doc3"
    assert same_ranking(oracle, subject, namespace, "ggg")[0][0] == "doc4"
    tie = same_ranking(oracle, subject, namespace, "bbb")
    assert tie[0][1] == pytest.approx(tie[1][1], abs=1e-2)
    assert all(
        s is not None and s < 0.9 for _, s in same_ranking(oracle, subject, namespace, "ccc")
    )

    subject.put(namespace, "doc5", {"key0": "hhh", "key1": "iii"}, index=False)
    listed = subject.search(namespace)
    assert len(listed) == 3 and all(r.score is None for r in listed)
    found = subject.search(namespace, query="hhh")
    assert [r.key for r in found][-1] == "doc5" and found[-1].score is None
    for key in ("doc3", "doc4", "doc5"):
        subject.delete(namespace, key)


@pytest.mark.parametrize("query", ["aaa", "bbb", "ccc", "abcd", "poisson"])
def test_scores(deployment: Deployment, embedder: Embedder, query: str) -> None:
    """An item indexed on a path it lacks scores by the paths it has: here one field, whose
    cosine similarity to the query is the score."""
    _, subject = stores(deployment, embedder, ["key0"])
    namespace = (tenant(),)
    subject.put(namespace, "doc", {"key0": "aaa"}, index=["key0", "key1"])
    (result,) = subject.search(namespace, query=query)
    doc = embedder.embed_documents(["aaa"])[0]
    asked = embedder.embed_query(query)
    cosine = float(doc @ asked) / float((doc @ doc) ** 0.5 * (asked @ asked) ** 0.5)
    assert result.score == pytest.approx(cosine, abs=1e-3)
    subject.delete(namespace, "doc")


def test_index_config_says_what_is_indexed(deployment: Deployment, embedder: Embedder) -> None:
    _, subject = stores(deployment, embedder, ["text", "details.summary"])
    assert subject.index_config == {
        "dims": embedder.dims,
        "embed": embedder.model_id,
        "fields": ["text", "details.summary"],
    }
    plain = MemstreamStore(deployment, tenants=NamespaceTenants((0,)))
    assert plain.index_config["fields"] == ["$"]


# -- TTL --------------------------------------------------------------------------------------


def ttl_store(deployment: Deployment, ttl: TTLConfig | None = None) -> MemstreamStore:
    return MemstreamStore(
        deployment, tenants=NamespaceTenants((0,)), ttl=ttl, read_your_writes=True
    )


def stored(deployment: Deployment, namespace: tuple[str, ...], key: str) -> Memory | None:
    memory_id = item_memory_id(namespace[0], namespace, key)
    return deployment.reader().memories_by_id(namespace[0], [memory_id])[0]


def deadline_of(deployment: Deployment, namespace: tuple[str, ...], key: str) -> datetime:
    memory = stored(deployment, namespace, key)
    assert memory is not None and memory.expires_at is not None
    return memory.expires_at


def lapse(deployment: Deployment, namespace: tuple[str, ...], key: str) -> None:
    deadline = deadline_of(deployment, namespace, key)
    wait_until(lambda: datetime.now(UTC) > deadline, "the item's TTL to run out")


def test_ttl_basic(deployment: Deployment) -> None:
    store = ttl_store(deployment, {"default_ttl": SECOND})
    namespace = (tenant(),)
    store.put(namespace, "item1", {"value": "test"})
    store.put(namespace, "kept", {"value": "no ttl"}, ttl=None)
    item = store.get(namespace, "item1", refresh_ttl=False)
    assert item is not None and item.value == {"value": "test"}
    lapse(deployment, namespace, "item1")
    assert store.sweep_ttl() == 1
    assert store.get(namespace, "item1") is None
    assert store.get(namespace, "kept") is not None
    assert store.sweep_ttl() == 0  # nothing lapsed twice
    store.delete(namespace, "kept")


def test_ttl_custom_value_per_item(deployment: Deployment) -> None:
    store = ttl_store(deployment)
    namespace = (tenant(),)
    store.put(namespace, "short", {"value": "short"}, ttl=SECOND)
    store.put(namespace, "long", {"value": "long"}, ttl=60.0)
    assert deadline_of(deployment, namespace, "long") - deadline_of(
        deployment, namespace, "short"
    ) > timedelta(minutes=59)
    lapse(deployment, namespace, "short")
    assert store.sweep_ttl() == 1
    assert store.get(namespace, "short") is None
    assert store.get(namespace, "long") is not None
    store.delete(namespace, "long")


def test_ttl_refresh_on_read_moves_the_deadline_and_no_read_does_not(
    deployment: Deployment,
) -> None:
    store = ttl_store(deployment, {"default_ttl": 10.0, "refresh_on_read": True})
    namespace = (tenant(),)
    store.put(namespace, "item1", {"value": "test"})
    first = deadline_of(deployment, namespace, "item1")
    assert store.get(namespace, "item1", refresh_ttl=False) is not None
    assert deadline_of(deployment, namespace, "item1") == first
    assert store.get(namespace, "item1") is not None  # refresh_on_read: the default
    by_get = deadline_of(deployment, namespace, "item1")
    assert by_get > first
    assert [i.key for i in store.search(namespace, query="test")] == ["item1"]
    assert deadline_of(deployment, namespace, "item1") >= by_get
    store.delete(namespace, "item1")


def test_an_expiry_overtaken_by_a_refresh_or_a_new_put_removes_nothing(
    stack: TestStack, deployment: Deployment
) -> None:
    """Two sweepers and a reader race: the lapse a sweeper saw is no longer the item's."""
    store = ttl_store(deployment, {"default_ttl": 10.0})
    namespace = (tenant(),)
    store.put(namespace, "item1", {"value": "test"})
    held = stored(deployment, namespace, "item1")
    assert held is not None and held.expires_at is not None
    assert store.get(namespace, "item1") is not None  # a refresh: later than the put's

    def expiry(put_event_id: str, deadline: datetime) -> ItemExpired:
        return ItemExpired(
            tenant=namespace[0],
            namespace=namespace,
            key="item1",
            put_event_id=put_event_id,
            deadline=deadline,
            expired_at=datetime.now(UTC),
        )

    refreshed = expiry(held.event_id, held.expires_at)  # the sweeper saw the put's deadline
    stack.publish([refreshed])
    stack.wait_applied([refreshed])
    assert store.get(namespace, "item1") is not None

    store.put(namespace, "item1", {"value": "again"})
    replaced = expiry(held.event_id, held.expires_at + timedelta(minutes=20))
    stack.publish([replaced])
    stack.wait_applied([replaced])
    item = store.get(namespace, "item1")
    assert item is not None and item.value == {"value": "again"}
    store.delete(namespace, "item1")


def test_omit_expired_filters_read_paths(deployment: Deployment) -> None:
    omitting = ttl_store(deployment, {"omit_expired": True, "refresh_on_read": True})
    keeping = ttl_store(deployment)
    root = tenant()
    expired_ns, control_ns = (root, "expired"), (root, "control")
    omitting.put(expired_ns, "e", {"data": "gone"}, ttl=SECOND)
    omitting.put(control_ns, "c", {"data": "keep"}, ttl=None)
    lapse(deployment, expired_ns, "e")
    before = deadline_of(deployment, expired_ns, "e")

    assert omitting.get(expired_ns, "e") is None
    assert omitting.get(control_ns, "c") is not None
    assert omitting.search(expired_ns) == []
    assert [i.key for i in omitting.search(control_ns)] == ["c"]
    assert omitting.list_namespaces(prefix=(root,)) == [control_ns]
    assert deadline_of(deployment, expired_ns, "e") == before  # a read never revives a lapse

    # Without omit_expired (LangGraph's default) a lapsed item is read until it is swept.
    assert keeping.get(expired_ns, "e", refresh_ttl=False) is not None
    assert [i.key for i in keeping.search(expired_ns, refresh_ttl=False)] == ["e"]
    assert keeping.sweep_ttl() == 1
    assert keeping.get(expired_ns, "e") is None
    keeping.delete(control_ns, "c")


def test_the_sweeper_thread_expires_items_and_stops(deployment: Deployment) -> None:
    store = ttl_store(deployment, {"default_ttl": SECOND, "sweep_interval_minutes": 1})
    namespace = (tenant(),)
    store.put(namespace, "item1", {"value": "test"})
    assert stored(deployment, namespace, "item1") is not None
    stopped = store.start_ttl_sweeper(sweep_interval_minutes=SECOND / 2)
    wait_until(lambda: stored(deployment, namespace, "item1") is None, "the sweeper to expire it")
    assert store.stop_ttl_sweeper(timeout=30)
    assert stopped.result(timeout=30) is None


def test_a_replay_expires_what_had_expired(
    stack: TestStack, deployment: Deployment, env: dict[str, str]
) -> None:
    store = ttl_store(deployment, {"default_ttl": 30.0})
    namespace = (tenant(),)
    store.put(namespace, "gone", {"value": "lapses"}, ttl=SECOND)
    store.put(namespace, "kept", {"value": "lives on"})
    store.put(namespace, "forever", {"value": "no ttl"}, ttl=None)
    lapse(deployment, namespace, "gone")
    assert store.sweep_ttl() == 1
    assert store.get(namespace, "kept") is not None  # refreshed: not in the log

    verified = memstream(env, "verify", "--tenant", namespace[0])
    assert verified.returncode == 0, verified.stdout + verified.stderr
    replayed = memstream(env, "replay")
    assert replayed.returncode == 0, replayed.stderr
    assert store.get(namespace, "gone") is None
    assert [i.key for i in store.search(namespace)] == ["kept", "forever"]
    for key in ("kept", "forever"):
        store.delete(namespace, key)
