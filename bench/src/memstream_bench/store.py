"""`bench store`: what each operation of the LangGraph store costs, beside the least code that
does the same job, measured in the same run, interleaved so that noise hits both alike.

- put: `MemstreamStore.put`, which returns once Kafka acknowledged the item's event. Raw: a
  confluent-kafka producer (idempotent, acks=all, as memstream's publisher) sending the same
  event's bytes to the same topic and waiting for the acknowledgement.
- get: `MemstreamStore.get`. Raw: one HGETALL of the item's hash.
- search: `MemstreamStore.search` with a query (limit 10) in one user's namespace. Raw: that
  tenant's hybrid recall (k = 10), the ranking the store builds on; the difference is what the
  store adds (reading the tenant's items, the filter, and recall at depth 1000).

Items go to `users` users of the LangMem convention ("memories", user), the user being the
tenant, through a worker of the bench's own namespace.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

from confluent_kafka import Producer

from memstream.config import Settings
from memstream.errors import InfrastructureError
from memstream.memory.embeddings import Embedder
from memstream.memory.events import ItemStored, item_memory_id
from memstream.memory.tenancy import validate_tenant
from memstream.streams.wire import event_record, producer_config
from memstream_bench.corpus import conversation_texts, turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Latency, Progress

__all__ = ["run_store"]

_DEADLINE_S = 120.0


def run_store(
    settings: Settings, embedder: Embedder, *, items: int = 300, users: int = 10
) -> BenchResult:
    # Imported here: the store needs the `langgraph` extra, which `bench` itself does not.
    from memstream.integrations.langgraph import MemstreamStore
    from memstream.integrations.namespaces import NamespaceTenants

    started = time.monotonic()
    progress = Progress("store")
    texts = conversation_texts()
    with BenchNamespace(settings, "store", embedder) as ns:
        progress.say("starting a worker")
        ns.start_worker(turns(1, embedder.model_id, tenants=1)[0])
        store = MemstreamStore(ns.deployment, tenants=NamespaceTenants((1,)))
        raw = Producer(producer_config(ns.kafka, "librdkafka"))
        slots = [(("memories", f"user-{i % users}"), f"item-{i}") for i in range(items)]
        puts, raw_puts = [], []
        raw_events: list[ItemStored] = []
        for i, (namespace, key) in enumerate(slots):
            value = {"content": texts[i % len(texts)]}
            t0 = time.perf_counter()
            store.put(namespace, key, value)
            t1 = time.perf_counter()
            same = ItemStored(
                tenant=namespace[1],
                namespace=namespace,
                key=key,
                put_id=uuid.uuid4().hex,
                value=json.dumps(value),
                texts=(json.dumps(value),),
                recorded_at=datetime.now(UTC),
                importance=0.5,
                embedding_model=embedder.model_id,
            )
            record = event_record(ns.topics, same)
            raw.produce(record.topic, record.value, record.key)
            raw_events.append(same)
            raw.flush(10)
            t2 = time.perf_counter()
            puts.append(t1 - t0)
            raw_puts.append(t2 - t1)
            progress.tick("puts", i + 1, items)

        # The raw puts are events too (new put ids): once the worker has applied them, it
        # has applied every put before them, and gets and searches run on an idle worker.
        progress.say("waiting for the worker to apply every put")
        if ns.status.wait_applied(raw_events, _DEADLINE_S):
            raise InfrastructureError("the bench's worker did not apply the puts in time")

        live = ns.status.live()
        gets, raw_gets = [], []
        for namespace, key in slots:
            hash_key = live.memory(namespace[1], item_memory_id(namespace[1], namespace, key))
            t0 = time.perf_counter()
            store.get(namespace, key)
            t1 = time.perf_counter()
            ns.redis.hgetall(hash_key)
            t2 = time.perf_counter()
            gets.append(t1 - t0)
            raw_gets.append(t2 - t1)

        recaller = ns.deployment.recaller(embedder)
        searches, raw_searches = [], []
        for i, (namespace, _) in enumerate(slots):
            query = " ".join(texts[(i * 7) % len(texts)].split()[:8])  # a search, not a text
            t0 = time.perf_counter()
            store.search(namespace, query=query, limit=10)
            t1 = time.perf_counter()
            recaller.recall(validate_tenant(namespace[1]), query, k=10)
            t2 = time.perf_counter()
            searches.append(t1 - t0)
            raw_searches.append(t2 - t1)
        store.close()

    measured = {
        "put": (Latency.of_seconds(puts), Latency.of_seconds(raw_puts), "produce + ack"),
        "get": (Latency.of_seconds(gets), Latency.of_seconds(raw_gets), "HGETALL"),
        "search": (
            Latency.of_seconds(searches),
            Latency.of_seconds(raw_searches),
            "the tenant's hybrid recall, k=10",
        ),
    }
    figures: dict[str, object] = {"items": items, "users": users}
    comparisons = []
    for name, (ours, base, baseline) in measured.items():
        figures[name] = {
            "p50_ms": ours.p50_ms,
            "p99_ms": ours.p99_ms,
            "raw_p50_ms": base.p50_ms,
            "raw_p99_ms": base.p99_ms,
        }
        for q in ("p50", "p99"):
            comparisons.append(
                Comparison(
                    f"{name} {q}",
                    getattr(ours, f"{q}_ms"),
                    getattr(base, f"{q}_ms"),
                    "ms",
                    baseline,
                    False,
                )
            )
    return BenchResult(
        name="store",
        figures=figures,
        comparisons=comparisons,
        notes=[
            f"{items} items of {users} users (tenants), {items // users} each",
            "put returns once Kafka acknowledged the event (durable), before a worker applies it",
        ],
        seconds=time.monotonic() - started,
    )
