"""`bench scale`: the sharded projection and the replicated log, each figure beside a baseline
measured in the same run, on a cluster of the bench's own (`OwnCluster`: 3 brokers, 3 Redis).

- one shard: the sharded code (MEMSTREAM_REDIS_SHARDS with one URL: `ShardHealers` and the
  router in front of every part) against today's one-Redis path (one `Healer` on the
  `RedisShard`'s writer, its recaller asked directly): projection throughput over the same
  events, freshness (publish to applied, one turn at a time) and recall p99, interleaved
  (beside them, as a diagnostic, a routed recaller on a projection of its own that never
  re-reads the stored layout);
- recall p99 of a tenant routed to its shard of 3 against the same memories in one Redis;
- projection throughput of 1 and 2 `memstream worker` processes over 3 shards;
- a reshard 1 → 2 under a stream of turns (`scale_faults.measure_reshard`), and the hook's
  p99 before, during and after a broker kill (`scale_faults.measure_broker_kill`).

Recall queries bring their own random unit vectors (`_GivenVectors`) so that embedding, the
same on both sides and the largest part of a real recall, does not hide what routing costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import random
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient

from memstream.bench.cluster import OwnCluster
from memstream.bench.corpus import turns
from memstream.bench.harness import BenchNamespace
from memstream.bench.report import BenchResult, Comparison
from memstream.bench.scale_faults import measure_broker_kill, measure_reshard, wait_applied
from memstream.bench.stats import Latency, Progress, ratio
from memstream.config import Settings
from memstream.errors import MemstreamError
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.events import MemoryEvent, MessageRecorded, memories_of
from memstream.memory.ports import Embedded, Recaller
from memstream.operations import worker_process
from memstream.projections.backend import RedisProjection
from memstream.projections.writer import RedisProjectionWriter
from memstream.providers import EmbedderCatalogue
from memstream.streams.heal import Healer, KafkaLog, ShardHealers
from memstream.streams.projector import Projector, RawMessage
from memstream.streams.replay import CountedDeadLetters
from memstream.streams.worker import BATCH_SIZE

__all__ = ["ScaleSizes", "run_scale"]

# 6 partitions divide evenly over 1, 2 and 3 shards.
PARTITIONS = 6
SHARDS = 3
BROKERS = 3
# The sharded code may cost at most 5 % with one shard: times ≤ 1.05x, rates ≥ 1/1.05.
ONE_SHARD_TARGET = "≤ 1.05x"
ONE_SHARD_RATE_TARGET = "≥ 0.95x"
ROUTED_TARGET = "p99 ≤ 1.1x"
_MODEL = "bench-random-unit-vectors"
_VOCABULARY = [f"word{i}" for i in range(500)]


@dataclasses.dataclass(frozen=True, slots=True)
class ScaleSizes:
    """How much each part does; the defaults run in a few minutes on a busy 2-core machine."""

    turns: int = 300  # projected per side (one shard) and per worker count
    fresh: int = 20  # turns sent one at a time per side (freshness)
    memories: int = 3000  # in the recall comparisons
    tenants: int = 60
    queries: int = 1000  # per way of asking
    stream_rate: float = 10.0  # turns/s while the reshard runs
    kill_phase_s: float = 4.0  # turns before the kill and after the broker rejoined
    timeout_s: float = 300.0


def run_scale(settings: Settings, embedder: Embedder, sizes: ScaleSizes) -> BenchResult:
    started = time.monotonic()
    progress = Progress("scale")
    progress.say(f"starting a cluster of {BROKERS} brokers and {SHARDS} Redis of the bench's own")
    with OwnCluster(settings, brokers=BROKERS, shards=SHARDS) as cluster:
        urls = cluster.redis_urls
        base = dataclasses.replace(
            cluster.settings, partitions=PARTITIONS, max_memories_per_tenant=0
        )
        one_url = dataclasses.replace(base, redis_url=urls[0], redis_shards="")
        sharded_one = dataclasses.replace(base, redis_url=urls[0], redis_shards=urls[0])
        three = dataclasses.replace(base, redis_url=urls[0], redis_shards=",".join(urls))
        figures: dict[str, object] = {
            "brokers": BROKERS,
            "shards": SHARDS,
            "partitions": PARTITIONS,
            "sizes": dataclasses.asdict(sizes),
        }
        comparisons: list[Comparison] = []
        notes: list[str] = []

        progress.say("one shard: projection throughput and freshness, sharded vs today's")
        one = _one_shard_projection(sharded_one, one_url, embedder, sizes, progress)
        figures["one_shard"] = one
        comparisons += [
            Comparison(
                "1 shard: projection throughput",
                one["sharded_events_per_s"],
                one["unsharded_events_per_s"],
                "events/s",
                "today's one-Redis path",
                True,
                ONE_SHARD_RATE_TARGET,
            ),
            Comparison(
                "1 shard: freshness p50",
                one["sharded_freshness_p50_ms"],
                one["unsharded_freshness_p50_ms"],
                "ms",
                "today's one-Redis path",
                False,
                ONE_SHARD_TARGET,
            ),
        ]

        progress.say("recall: 1 shard routed vs direct, 3 shards routed vs one Redis")
        recall = _recall(one_url, three, sizes, progress)
        figures["recall"] = recall
        comparisons += [
            Comparison(
                "1 shard: recall p99",
                recall["routed_one_p99_ms"],
                recall["direct_one_p99_ms"],
                "ms",
                "today's one-Redis path",
                False,
                ONE_SHARD_TARGET,
            ),
            Comparison(
                "recall p99, 1 of 3 shards",
                recall["routed_three_p99_ms"],
                recall["routed_one_p99_ms"],
                "ms",
                "the same memories in one Redis",
                False,
                ROUTED_TARGET,
            ),
        ]
        one |= {
            "recall_p99_ms": recall["routed_one_p99_ms"],
            "unsharded_recall_p99_ms": recall["direct_one_p99_ms"],
            "recall_p99_ratio": recall["one_shard_p99_ratio"],
        }

        progress.say("workers over 3 shards")
        workers = _workers(three, embedder, sizes, progress)
        figures["workers"] = workers
        comparisons.append(
            Comparison(
                "3 shards: 2 workers vs 1",
                workers["2"]["events_per_s"],
                workers["1"]["events_per_s"],
                "events/s",
                "1 worker, same shards",
                True,
            )
        )

        progress.say("reshard 1 -> 2 under a stream of turns")
        moved = measure_reshard(
            sharded_one,
            urls[:2],
            embedder,
            progress,
            rate=sizes.stream_rate,
            timeout_s=sizes.timeout_s,
        )
        figures["reshard"] = moved
        notes.append(
            f"reshard 1 -> 2 took {moved['elapsed_s']} s (warm-up {moved['warm_s']} s); a "
            f"moved tenant's recall was routed to its old shard up to "
            f"{moved['old_shard_window_s']} s after the switch (bound {moved['window_bound_s']} "
            f"s), {moved['recall_errors']} recall errors, {moved['lost']} lost, "
            f"{moved['doubled']} doubled"
        )

        progress.say("the hook while a broker is killed")
        kill = measure_broker_kill(
            cluster, base, embedder, progress, phase_s=sizes.kill_phase_s, timeout_s=sizes.timeout_s
        )
        figures["broker_kill"] = kill
        for phase in ("before", "during", "after"):
            comparisons.append(
                Comparison(
                    f"hook p99 {phase} a broker kill",
                    kill[phase]["hook_p99_ms"],
                    kill[phase]["raw_enqueue_p99_ms"],
                    "ms",
                    "raw producer enqueue",
                    False,
                )
            )
        notes.append(
            f"broker {kill['killed']} killed: new leaders after {kill['failover_s']} s, back in "
            f"every ISR after {kill['rejoined_s']} s; {kill['turns']} turns, "
            f"{kill['records']} records in the log"
        )
    notes.append(
        f"{BROKERS} brokers and {SHARDS} Redis on one machine: shards and workers share its "
        "cores, so this shows the code's cost, not the capacity more machines add"
    )
    return BenchResult("scale", figures, comparisons, notes, time.monotonic() - started)


# -- one shard: the sharded projection against today's -----------------------------------------

Project = Callable[[Sequence[RawMessage]], Awaitable[object]]


def _one_shard_projection(
    sharded: Settings,
    unsharded: Settings,
    embedder: Embedder,
    sizes: ScaleSizes,
    progress: Progress,
) -> dict[str, float]:
    with (
        BenchNamespace(sharded, "one-sharded", embedder) as a,
        BenchNamespace(unsharded, "one-today", embedder) as b,
    ):
        events = turns(sizes.turns, embedder.model_id, tenants=sizes.tenants)
        for ns in (a, b):
            ns.publish(events)

        async def run() -> dict[str, float]:
            consumers = {name: _consumer(ns) for name, ns in (("sharded", a), ("unsharded", b))}
            for consumer in consumers.values():
                await consumer.start()
            try:
                projected = {
                    "sharded": await _sharded_side(a),
                    "unsharded": await _unsharded_side(b),
                }
                backlog = {
                    name: await _read(consumer, len(events), sizes.timeout_s)
                    for name, consumer in consumers.items()
                }
                spent = dict.fromkeys(projected, 0.0)
                for n, start in enumerate(range(0, len(events), BATCH_SIZE)):
                    # Who goes first alternates, so drift on a shared machine hits both alike.
                    order = list(projected) if n % 2 == 0 else list(reversed(projected))
                    for name in order:
                        t0 = time.perf_counter()
                        await projected[name](backlog[name][start : start + BATCH_SIZE])
                        spent[name] += time.perf_counter() - t0
                    progress.tick(
                        "events projected per side",
                        min(start + BATCH_SIZE, len(events)),
                        len(events),
                    )
                fresh = turns(sizes.fresh, embedder.model_id, tenants=sizes.tenants)
                latency: dict[str, list[float]] = {name: [] for name in projected}
                publishers = {"sharded": a, "unsharded": b}
                for n, event in enumerate(fresh):
                    order = list(projected) if n % 2 == 0 else list(reversed(projected))
                    for name in order:
                        latency[name].append(
                            await _fresh(publishers[name], consumers[name], projected[name], event)
                        )
            finally:
                for consumer in consumers.values():
                    await consumer.stop()
            out: dict[str, float] = {}
            for name in projected:
                fresh_latency = Latency.of_seconds(latency[name])
                out[f"{name}_events_per_s"] = round(len(events) / spent[name], 1)
                out[f"{name}_freshness_p50_ms"] = fresh_latency.p50_ms
                out[f"{name}_freshness_p99_ms"] = fresh_latency.p99_ms
            out["events"] = len(events)
            out["throughput_ratio"] = ratio(
                out["sharded_events_per_s"], out["unsharded_events_per_s"]
            )
            out["freshness_p50_ratio"] = ratio(
                out["sharded_freshness_p50_ms"], out["unsharded_freshness_p50_ms"]
            )
            return out

        return asyncio.run(run())


def _projector(ns: BenchNamespace) -> Callable[..., Projector]:
    deployment = ns.deployment

    def make(writer: object, generations: object) -> Projector:
        return Projector(
            deployment.embedders,
            writer,  # type: ignore[arg-type]
            generations,  # type: ignore[arg-type]
            CountedDeadLetters(),
            default_importance=deployment.settings.default_importance,
            keyring=deployment.keyring(),
        )

    return make


async def _sharded_side(ns: BenchNamespace) -> Project:
    """The worker's path: `ShardHealers` over the projection's layout (one URL)."""
    healers = ShardHealers(ns.projection, _projector(ns), KafkaLog(ns.kafka, ""))
    await healers.start()
    return healers.project


async def _unsharded_side(ns: BenchNamespace) -> Project:
    """Today's path before shards: one healer on the one Redis's writer."""
    writer, generations = ns.projection.home.live_writer()
    projector = _projector(ns)(writer, generations)
    await projector.start()
    return Healer(projector, writer, KafkaLog(ns.kafka, "")).project


def _consumer(ns: BenchNamespace) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        ns.topics.memory,
        **ns.kafka.aiokafka(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=BATCH_SIZE,
    )


async def _read(consumer: AIOKafkaConsumer, count: int, timeout_s: float) -> list[RawMessage]:
    messages: list[RawMessage] = []
    deadline = time.monotonic() + timeout_s
    while len(messages) < count:
        if time.monotonic() > deadline:
            raise MemstreamError(f"read {len(messages)} of {count} records in {timeout_s:.0f}s")
        batches = await consumer.getmany(timeout_ms=200)
        messages += [RawMessage.of(r) for records in batches.values() for r in records]
    return messages


async def _fresh(
    ns: BenchNamespace, consumer: AIOKafkaConsumer, project: Project, event: MemoryEvent
) -> float:
    """From publish returning to the event applied, through `project`."""
    async with ns.deployment.event_publisher() as publisher:
        await publisher.publish([event])
        sent = time.perf_counter()
        await project(await _read(consumer, 1, 60))
        return time.perf_counter() - sent


# -- recall: routed to one of 3 shards, against one Redis -------------------------------------


class _GivenVectors:
    """An embedder whose query vector is the one the bench set (`next`): recall's search,
    fusion and routing are timed, not the model."""

    model_id = _MODEL

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.next: Vectors = np.zeros(dims, dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:  # pragma: no cover
        raise AssertionError("the scale bench seeds its own vectors")

    def embed_query(self, text: str) -> Vectors:
        return self.next


def _recall(
    one: Settings, three: Settings, sizes: ScaleSizes, progress: Progress, dims: int = 384
) -> dict[str, float]:
    given = _GivenVectors(dims)
    with (
        BenchNamespace(one, "recall-one", given) as r1,
        BenchNamespace(three, "recall-three", given) as r3,
    ):
        for ns in (r1, r3):
            _seed(ns, sizes, dims, progress)
        tuning = r1.deployment.recall_tuning()
        catalogue = EmbedderCatalogue(one, given)
        calls: dict[str, Recaller] = {
            "routed_one": r1.projection.recaller(catalogue, tuning=tuning),
            "direct_one": r1.projection.home.recaller(catalogue, tuning=tuning),
            # A diagnostic: routed, never re-reading the stored layout, on a projection (and
            # so a connection pool) of its own; the two sides above share shard 0's client.
            "routed_one_static": RedisProjection(
                one, r1.deployment.partition_of, layout_refresh_s=math.inf
            ).recaller(catalogue, tuning=tuning),
            "routed_three": r3.projection.recaller(catalogue, tuning=tuning),
        }
        rng = np.random.default_rng(11)
        words = random.Random(11)
        timings: dict[str, list[float]] = {name: [] for name in calls}
        warm_up = 30
        for n in range(sizes.queries + warm_up):
            tenant = f"tenant-{words.randrange(sizes.tenants)}"
            vector = rng.standard_normal(dims).astype(np.float32)
            given.next = vector / np.linalg.norm(vector)
            text = " ".join(words.choices(_VOCABULARY, k=3))
            names = list(calls)
            shift = n % len(names)
            for name in names[shift:] + names[:shift]:
                t0 = time.perf_counter()
                calls[name].recall(tenant, text)
                if n >= warm_up:
                    timings[name].append(time.perf_counter() - t0)
            progress.tick("queries", n + 1, sizes.queries + warm_up)
    out: dict[str, float] = {"memories": sizes.memories, "tenants": sizes.tenants}
    for name, values in timings.items():
        latency = Latency.of_seconds(values)
        out[f"{name}_p50_ms"] = latency.p50_ms
        out[f"{name}_p99_ms"] = latency.p99_ms
    out["one_shard_p99_ratio"] = ratio(out["routed_one_p99_ms"], out["direct_one_p99_ms"])
    out["static_layout_p99_ratio"] = ratio(
        out["routed_one_static_p99_ms"], out["direct_one_p99_ms"]
    )
    out["three_shards_p99_ratio"] = ratio(out["routed_three_p99_ms"], out["routed_one_p99_ms"])
    return out


def _seed(ns: BenchNamespace, sizes: ScaleSizes, dims: int, progress: Progress) -> None:
    """`sizes.memories` memories over `sizes.tenants` tenants, each written to its tenant's
    shard through the projection's writer (the same vectors in every namespace)."""
    rng = np.random.default_rng(5)
    words = random.Random(5)
    at = datetime.now(UTC)
    events = [
        MessageRecorded(
            tenant=f"tenant-{i % sizes.tenants}",
            thread="t",
            source_id=str(i),
            content=" ".join(words.choices(_VOCABULARY, k=12)),
            speaker="user",
            recorded_at=at,
            importance=0.5,
            embedding_model=_MODEL,
        )
        for i in range(sizes.memories)
    ]
    vectors = rng.standard_normal((sizes.memories, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    by_shard: dict[int, list[Embedded]] = {}
    for row, event in enumerate(events):
        embedded = Embedded(event, memories_of(event), vectors[row : row + 1])
        by_shard.setdefault(ns.projection.shard_of(event.tenant), []).append(embedded)

    async def write() -> None:
        for shard, batch in by_shard.items():
            part = ns.projection.shards[shard]
            writer = RedisProjectionWriter(
                part.async_client(), ns.keys, max_memories=0, url=part.connection.url
            )
            await writer.ensure_live_index(_MODEL, dims)
            for start in range(0, len(batch), 500):
                await writer.apply(batch[start : start + 500])
                done = min(start + 500, len(batch))
                progress.tick(f"memories seeded on shard {shard}", done, len(batch))

    asyncio.run(write())


# -- workers over 3 shards ----------------------------------------------------------------------


def _workers(
    three: Settings, embedder: Embedder, sizes: ScaleSizes, progress: Progress
) -> dict[str, dict[str, float]]:
    out = {}
    for count in (1, 2):
        with BenchNamespace(three, f"workers{count}", embedder) as ns, _running(ns, count):
            events = turns(sizes.turns, embedder.model_id, tenants=sizes.tenants)
            t0 = time.perf_counter()
            ns.publish(events)
            wait_applied(ns.deployment, events, sizes.timeout_s, progress)
            seconds = time.perf_counter() - t0
        out[str(count)] = {"events": len(events), "events_per_s": round(len(events) / seconds, 1)}
        progress.say(f"{count} worker(s): {out[str(count)]['events_per_s']} events/s")
    return out


@contextlib.contextmanager
def _running(ns: BenchNamespace, count: int) -> Iterator[None]:
    """`count` worker processes on the namespace, each holding partitions once it returns."""
    with contextlib.ExitStack() as stack:
        for n in range(count):
            log = stack.enter_context(_log(f"{ns.settings.namespace}-{n}"))
            probe = turns(1, ns.deployment.embedding_model, tenants=1)[0]
            stack.enter_context(worker_process(ns.deployment, log, probe, loglevel="warning"))
        asyncio.run(_settled(ns, count, 120.0))
        yield


@contextlib.contextmanager
def _log(name: str) -> Iterator[Path]:
    path = Path(tempfile.gettempdir()) / f"{name}.log"
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


async def _settled(ns: BenchNamespace, members: int, timeout_s: float) -> None:
    """Wait until the worker group is stable with `members` members (partitions shared)."""
    admin = AIOKafkaAdminClient(**ns.kafka.aiokafka(), request_timeout_ms=10_000)
    await admin.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            (response,) = await admin.describe_consumer_groups([ns.topics.worker_group])
            group = response.groups[0]
            state, joined = group[2], group[5]
            if state == "Stable" and len(joined) == members:
                return
            await asyncio.sleep(0.2)
    finally:
        await admin.close()
    raise MemstreamError(f"the {members} workers did not share the partitions in {timeout_s}s")
