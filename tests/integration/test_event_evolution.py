"""The log evolves and other producers write it: on the real Kafka, Redis and worker.

Golden payloads of every released version replay through a real worker to the memories they
pinned; a log mixing versions rebuilds equal to the live projection; kafka-python, producing
as a service in another language would, records minimal and full turns, and its junk goes to
the dead letters with a reason; a replay that meets dead letters refuses to swap unless told.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer

from memstream import Settings, decode_event, encode_event
from memstream.deployment import Deployment
from memstream.operations import drop

from .commands import memstream
from .helpers import TestStack, running_worker, wait_until

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "events"
# The order a log of the old release and the new one would hold them in.
LOG = [
    "v1/TurnRecorded",
    "v2/TurnCompleted",
    "v1/MessageRecorded",
    "v1/MemoriesConsolidated",  # replaces the v1 turn's two memories with a summary
    "v1/ConsolidationRequested",
    "v1/MemoryForgotten",  # thread monday before 30 Nov: the summary is newer, nothing goes
    "v1/MemoryForgotten-ids",  # ids nobody has: tombstones only
    "v1/MemoryForgotten-all",  # everything of globex: the message
]


@pytest.fixture(scope="module")
def evolution_env(
    env: dict[str, str], settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """A namespace of its own with its own worker: the golden payloads name fixed tenants,
    and the junk this module writes must not reach other tests' replays. The golden payloads
    were recorded for MiniLM (release 0.1.0's default embedder); this worker has the default
    settings, and projects them with its own model all the same."""
    own = env | {"MEMSTREAM_NAMESPACE": f"evo-{uuid.uuid4().hex[:8]}"}
    with running_worker(own, tmp_path_factory.mktemp("evolution") / "worker.log"):
        yield own
    drop(Deployment(Settings.from_env(own)))


@pytest.fixture(scope="module")
def evo(evolution_env: dict[str, str]) -> TestStack:
    return TestStack(Settings.from_env(evolution_env))


def producer(stack: TestStack) -> KafkaProducer:
    # kafka-python's default partitioner is the Java client's murmur2, as memstream's are.
    return KafkaProducer(bootstrap_servers=stack.settings.bootstrap_servers, acks="all")


def stored(stack: TestStack, tenant: str) -> dict[str, str]:
    """id -> content of the tenant's memories in the live generation."""
    prefix = stack.status.live().tenant_memory_prefix(tenant)
    found = {}
    for key in stack.redis.scan_iter(match=f"{prefix}*"):
        content = stack.redis.hget(key, "content")
        found[key.decode().removeprefix(prefix)] = (content or b"").decode()
    return found


def pinned(name: str) -> dict[str, str]:
    memories = json.loads((GOLDEN / f"{name}.memories.json").read_text())
    return {m["id"]: m["content"] for m in memories}


def test_golden_payloads_replay_through_the_worker_to_the_memories_they_pinned(
    evo: TestStack, evolution_env: dict[str, str]
) -> None:
    payloads = [(GOLDEN / f"{name}.json").read_bytes().strip() for name in LOG]
    with producer(evo) as kafka:
        for raw in payloads:
            kafka.send(evo.topics.memory, raw, key=json.loads(raw)["tenant"].encode())
        kafka.flush()
    events = [decode_event(raw) for raw in payloads]
    evo.wait_applied(events)

    assert stored(evo, "acme") == pinned("v2/TurnCompleted") | pinned("v1/MemoriesConsolidated")
    assert stored(evo, "globex") == {}

    # The old turn again, as the new release writes it: the same id, nothing doubles.
    again = encode_event(events[0])
    assert json.loads(again)["type"] == "TurnCompleted"
    evo.publish_raw(b"acme", again)
    evo.wait_applied([decode_event(again)])
    assert len(stored(evo, "acme")) == 3

    verified = memstream(evolution_env, "verify")
    assert verified.returncode == 0, verified.stderr
    assert "equals the rebuild" in verified.stderr


def test_kafka_python_records_minimal_and_full_turns_and_its_junk_is_dead_lettered(
    evo: TestStack,
) -> None:
    tenant = f"kp-{uuid.uuid4().hex[:6]}"
    minimal = {
        "type": "TurnCompleted",
        "tenant": tenant,
        "thread": "java-service",
        "run": "r-1",
        "turn": 0,
        "query": "Where do the nightly backups go?",
        "answer": "To the cold bucket in Frankfurt.",
    }
    full = {
        **minimal,
        "version": 2,
        "turn": 1,
        "query": "Who approves refunds over 500 euros?",
        "answer": "Priya from finance approves them.",
        "recorded_at": "2026-11-30T10:00:00Z",
        "importance": 0.9,
        "metadata": {"source": "go-service"},
        "embedding_model": evo.model_id,
    }
    full["id"] = decode_event(json.dumps(full).encode()).id
    old = {**minimal, "type": "TurnRecorded", "version": 1, "turn": 2, "query": "Old format?"}
    old |= {"answer": "Still read.", "recorded_at": "2026-11-29T10:00:00+00:00"}
    old |= {"importance": 0.5, "embedding_model": evo.model_id}
    junk = {
        "not json": b"{oops",
        "event_id_mismatch": json.dumps({**minimal, "turn": 3, "id": str(uuid.uuid4())}).encode(),
        "unknown_event_type": json.dumps({**minimal, "type": "TurnHappened"}).encode(),
        "event_decode": json.dumps({**minimal, "turn": "four"}).encode(),
    }
    key = tenant.encode()
    with producer(evo) as kafka:
        for body in (minimal, full, minimal, old):  # the minimal turn twice: one memory pair
            kafka.send(evo.topics.memory, json.dumps(body).encode(), key=key)
        for raw in junk.values():
            kafka.send(evo.topics.memory, raw, key=key)
        # A turn under another tenant's key: a dead letter, never that tenant's memory.
        stray = {**minimal, "turn": 5, "query": "misrouted"}
        kafka.send(evo.topics.memory, json.dumps(stray).encode(), key=b"someone-else")
        last = {**minimal, "turn": 6, "query": "Is the worker still up?", "answer": "Yes."}
        kafka.send(evo.topics.memory, json.dumps(last).encode(), key=key)
        kafka.flush()

    recaller = evo.recaller()
    wait_until(
        lambda: any(h.memory.content == "Yes." for h in recaller.recall(tenant, "worker up", k=20)),
        "the turn after the junk to be projected",
    )
    contents = sorted(stored(evo, tenant).values())
    assert contents == sorted(
        [
            minimal["query"], minimal["answer"], full["query"], full["answer"],
            old["query"], old["answer"], last["query"], last["answer"],
        ]
    )  # fmt: skip
    # The question's words find the turn; its answer takes the question's place.
    hits = recaller.recall(tenant, "refunds over 500 euros", k=2)
    assert [h.memory.content for h in hits] == [full["answer"], full["query"]]
    assert hits[0].memory.importance == 0.9 and dict(hits[0].memory.metadata) == {
        "source": "go-service"
    }

    def letters() -> list[dict[str, object]]:
        records = evo.read_topic(
            evo.topics.monitoring,
            lambda rs: sum(b'"DeadLettered"' in (r.value or b"") for r in rs) >= len(junk) + 1,
        )
        return [json.loads(r.value) for r in records if b'"DeadLettered"' in (r.value or b"")]

    codes = sorted(str(letter["code"]) for letter in letters())
    assert codes == sorted(
        ["event_decode", "event_decode", "event_id_mismatch", "unknown_event_type",
         "event_key_mismatch"]
    )  # fmt: skip
    assert any("carries id" in str(letter["reason"]) for letter in letters())


def test_a_replay_that_meets_dead_letters_says_so_and_swaps_nothing_unless_allowed(
    evo: TestStack, evolution_env: dict[str, str]
) -> None:
    tenant = f"rp-{uuid.uuid4().hex[:6]}"
    evo.publish_raw(tenant.encode(), b"[1, 2, 3]")
    turn = evo.turn(tenant, "What colour is the staging banner?", "Orange.")
    evo.publish([turn])
    evo.wait_applied([turn])
    live = evo.status.live().generation

    refused = memstream(evolution_env, "replay")
    assert refused.returncode != 0
    assert "cannot be read by this build" in refused.stderr
    assert "event_decode" in refused.stderr and "--allow-dead-letters" in refused.stderr
    assert evo.status.live().generation == live  # nothing swapped

    assert memstream(evolution_env, "verify").returncode != 0

    allowed = memstream(evolution_env, "replay", "--allow-dead-letters")
    assert allowed.returncode == 0, allowed.stderr
    assert "dead letters allowed" in allowed.stderr
    assert evo.status.live().generation != live
    # The turn is back: its question's words find it, and its answer takes the question's place.
    rebuilt = evo.recaller().recall(tenant, "staging banner", k=2)
    assert [h.memory.content for h in rebuilt] == ["Orange.", "What colour is the staging banner?"]
    verified = memstream(evolution_env, "verify", "--allow-dead-letters")
    assert verified.returncode == 0, verified.stderr
