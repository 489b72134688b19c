"""`bench scale`'s ratios (issue 23, item 6): the sharded code with one shard against today's
one-Redis path, and recall routed to one of 3 shards against one Redis, in many short rounds.

A single long run of each side cannot tell 1.05 from 1.0 on a shared machine: the load drifts
by more than that between the two. So every round measures every ratio once, its two sides
back to back, and a ratio is reported as its median over the rounds with its range (`Spread`),
beside every round's figures and the figures pooled over all rounds. In each round:

- projection throughput: each side projects `turns` events read from the log beforehand, in
  two halves, A B B A (which side is A alternates by round);
- freshness: `fresh` turns per side, one at a time, from publish returning to the turn applied
  (consume + project), the sides alternating turn by turn;
- recall: `queries` per way of asking (routed over one shard, the shard's own recaller, routed
  to a tenant's shard of 3), each query in the next of every order of the ways.

The sides: the worker's sharded path (MEMSTREAM_REDIS_SHARDS with one URL: `ShardHealers`,
which follows the layout, then its one shard's healer) against today's (one `Healer` on the
`RedisShard`'s writer); the routed recaller (`RedisProjection.recaller`) against the shard's
own (`RedisShard.recaller`), both on shard 0's one client, as in every process. The 3-shard
recall is compared with the same memories in one Redis, asked through the same routed code,
so that the figure is what spreading over shards costs, not the router (measured beside it).
Recall queries bring their own random unit vectors (`_GivenVectors`) so that embedding, the
same on both sides and the largest part of a real recall, does not hide what routing costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import numpy as np
from aiokafka import AIOKafkaConsumer

from memstream.config import Settings
from memstream.errors import MemstreamError
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.events import memories_of
from memstream.memory.ports import Embedded, Recaller
from memstream.memory.tenancy import TenantId, validate_tenant
from memstream.projections.writer import RedisProjectionWriter
from memstream.providers import EmbedderCatalogue
from memstream.streams.event_publisher import EventPublisher
from memstream.streams.heal import Healer, KafkaLog, ShardHealers
from memstream.streams.projector import Projector, RawMessage
from memstream.streams.replay import CountedDeadLetters
from memstream.streams.worker import BATCH_SIZE
from memstream_bench.corpus import turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.recall import RANDOM_VECTORS_MODEL, seeded_message
from memstream_bench.report import Comparison
from memstream_bench.stats import Latency, Progress, Spread, ratio

__all__ = ["RatioSizes", "Ratios", "measure_ratios"]

# The sharded code may cost at most 5 % with one shard: times ≤ 1.05x, rates ≥ 1/1.05.
ONE_SHARD_TARGET = "≤ 1.05x"
ONE_SHARD_RATE_TARGET = "≥ 0.95x"
ROUTED_TARGET = "p99 ≤ 1.1x"
_VOCABULARY = [f"word{i}" for i in range(500)]
_DIMS = 384
# Projected and asked before the first round, untimed: indexes made, connections opened.
_WARM_EVENTS = 16
_WARM_QUERIES = 30


@dataclasses.dataclass(frozen=True, slots=True)
class RatioSizes:
    """How much each round does, and how many rounds. The defaults give each side ≥ 100
    freshness turns and a p99 over ≥ 5,000 queries in all, in a few minutes on a quiet
    machine."""

    rounds: int = 10
    turns: int = 64  # projected per side per round (two halves, A B B A)
    fresh: int = 12  # turns sent one at a time per side per round
    memories: int = 3000  # in the recall comparisons, seeded once
    tenants: int = 60
    queries: int = 2000  # per way of asking per round (a p99 over 20 tail samples)
    timeout_s: float = 300.0


@dataclasses.dataclass(frozen=True, slots=True)
class _Ratio:
    """One ratio of the issue's targets: which round figures it divides."""

    measure: str
    ours: str
    baseline: str
    unit: str
    baseline_is: str
    higher_is_better: bool
    target: str


_RATIOS = {
    "throughput": _Ratio(
        "1 shard: projection throughput",
        "sharded_events_per_s",
        "unsharded_events_per_s",
        "events/s",
        "today's one-Redis path",
        True,
        ONE_SHARD_RATE_TARGET,
    ),
    "freshness_p50": _Ratio(
        "1 shard: freshness p50",
        "sharded_freshness_p50_ms",
        "unsharded_freshness_p50_ms",
        "ms",
        "today's one-Redis path",
        False,
        ONE_SHARD_TARGET,
    ),
    "recall_p99": _Ratio(
        "1 shard: recall p99",
        "routed_one_p99_ms",
        "direct_one_p99_ms",
        "ms",
        "today's one-Redis path",
        False,
        ONE_SHARD_TARGET,
    ),
    "routed_three_p99": _Ratio(
        "recall p99, 1 of 3 shards",
        "routed_three_p99_ms",
        "routed_one_p99_ms",
        "ms",
        "the same memories in one Redis",
        False,
        ROUTED_TARGET,
    ),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Ratios:
    """What `measure_ratios` found: the figures for the report's JSON, one comparison per
    target (the median ratio against 1), and a note per ratio with its rounds."""

    figures: dict[str, object]
    comparisons: list[Comparison]
    notes: list[str]


def measure_ratios(
    sharded_one: Settings,
    one: Settings,
    three: Settings,
    embedder: Embedder,
    sizes: RatioSizes,
    progress: Progress,
) -> Ratios:
    """The ratios over `sizes.rounds` rounds: `sharded_one` names one Redis as a list of
    shards, `one` the same Redis as today's one URL, `three` three shards."""
    given = _GivenVectors(_DIMS)
    with contextlib.ExitStack() as stack:
        # Freshness has namespaces of its own: a fresh turn landing behind a backlog not yet
        # projected would have its healer project the backlog first, inside the timing.
        bulk, fresh = (
            {
                side: stack.enter_context(BenchNamespace(settings, f"{use}-{side}", embedder))
                for side, settings in (("sharded", sharded_one), ("unsharded", one))
            }
            for use in ("tput", "fresh")
        )
        r1 = stack.enter_context(BenchNamespace(one, "recall-one", given))
        r3 = stack.enter_context(BenchNamespace(three, "recall-three", given))
        count = _WARM_EVENTS + sizes.rounds * sizes.turns
        events = turns(count, embedder.model_id, tenants=sizes.tenants)
        for ns in bulk.values():
            ns.publish(events)
        for ns in (r1, r3):
            _seed(ns, sizes, progress)
        tuning = r1.deployment.recall_tuning()
        catalogue = EmbedderCatalogue(one, given)
        recallers: dict[str, Recaller] = {
            "routed_one": r1.projection.recaller(catalogue, tuning=tuning),
            "direct_one": r1.projection.home.recaller(catalogue, tuning=tuning),
            "routed_three": r3.projection.recaller(catalogue, tuning=tuning),
        }
        run = _Rounds(bulk, fresh, _Queries(given, sizes), recallers, embedder, sizes, progress)
        rounds = asyncio.run(run.all(count))
    return _summary(rounds, run)


def _summary(rounds: list[dict[str, float]], run: _Rounds) -> Ratios:
    spreads = {name: Spread.of([r[f"{name}_ratio"] for r in rounds]) for name in _RATIOS}
    pooled = run.pooled()
    figures: dict[str, object] = {
        "ratios": {
            name: {
                "median": spread.median,
                "min": spread.low,
                "max": spread.high,
                "rounds": spread.rounds,
                "pooled": ratio(pooled[_RATIOS[name].ours], pooled[_RATIOS[name].baseline]),
                "target": _RATIOS[name].target,
            }
            for name, spread in spreads.items()
        },
        "pooled": pooled,
        "rounds": rounds,
    }
    comparisons = [
        Comparison(
            f"{_RATIOS[name].measure}, median of {spread.rounds} rounds "
            f"(min {spread.low:.2f}, max {spread.high:.2f})",
            spread.median,
            1.0,
            "x",
            f"{_RATIOS[name].baseline_is} = 1",
            _RATIOS[name].higher_is_better,
            _RATIOS[name].target,
        )
        for name, spread in spreads.items()
    ]
    notes = []
    for name, spread in spreads.items():
        r = _RATIOS[name]
        each = ", ".join(f"{x[name + '_ratio']:.2f}" for x in rounds)
        notes.append(
            f"{r.measure}: median {spread}; pooled over every round {pooled[r.ours]:.3g} "
            f"against {pooled[r.baseline]:.3g} {r.unit}; per round: {each}"
        )
    return Ratios(figures, comparisons, notes)


# -- the rounds ---------------------------------------------------------------------------------

Project = Callable[[Sequence[RawMessage]], Awaitable[object]]
_SIDES = ("sharded", "unsharded")


class _Rounds:
    """Both sides (sharded, unsharded) of the projection (`bulk`: a backlog each) and of
    freshness (`fresh`: turns sent one at a time), and the recallers, round after round; keeps
    every sample for the pooled figures."""

    def __init__(
        self,
        bulk: dict[str, BenchNamespace],
        fresh: dict[str, BenchNamespace],
        queries: _Queries,
        recallers: dict[str, Recaller],
        embedder: Embedder,
        sizes: RatioSizes,
        progress: Progress,
    ) -> None:
        self._bulk = bulk
        self._fresh_ns = fresh
        self._queries = queries
        self._recallers = recallers
        self._embedder = embedder
        self._sizes = sizes
        self._progress = progress
        self._spent = dict.fromkeys(_SIDES, 0.0)
        self._projected = 0
        self._fresh: dict[str, list[float]] = {side: [] for side in _SIDES}
        self._recall: dict[str, list[float]] = {way: [] for way in recallers}

    async def all(self, count: int) -> list[dict[str, float]]:
        """Every round, after an untimed warm-up; each round's figures and ratios."""
        async with contextlib.AsyncExitStack() as stack:
            consumers = {side: await _started(stack, ns) for side, ns in self._bulk.items()}
            fresh = _Fresh(
                {
                    side: await stack.enter_async_context(ns.deployment.event_publisher())
                    for side, ns in self._fresh_ns.items()
                },
                {side: await _started(stack, ns) for side, ns in self._fresh_ns.items()},
                await _sides(self._fresh_ns),
            )
            project = await _sides(self._bulk)
            # In (offset, partition) order: the same events in the same order on both sides
            # (their partitions hold the same records), each partition's in its log's order.
            backlog = {
                side: sorted(
                    await _read(consumers[side], count, self._sizes.timeout_s),
                    key=lambda m: (m.offset, m.partition),
                )
                for side in _SIDES
            }
            for side in _SIDES:
                await project[side](backlog[side][:_WARM_EVENTS])
            await self._freshness(fresh, list(_SIDES), timed=False)
            for _ in range(_WARM_QUERIES):
                for recaller in self._recallers.values():
                    recaller.recall(*self._queries.next())
            rounds = []
            for n in range(self._sizes.rounds):
                # Which side goes first alternates by round, so drift hits both alike.
                sides = list(_SIDES) if n % 2 == 0 else list(reversed(_SIDES))
                start = _WARM_EVENTS + n * self._sizes.turns
                chunk = {side: backlog[side][start : start + self._sizes.turns] for side in _SIDES}
                figures = await self._throughput(project, chunk, sides)
                figures |= await self._freshness(fresh, sides)
                figures |= self._recall_round(n)
                for name, r in _RATIOS.items():
                    figures[f"{name}_ratio"] = ratio(figures[r.ours], figures[r.baseline])
                rounds.append({"round": float(n + 1), **figures})
                self._progress.say(
                    f"round {n + 1}/{self._sizes.rounds}: "
                    + ", ".join(f"{name} {figures[f'{name}_ratio']:.2f}" for name in _RATIOS)
                )
            return rounds

    async def _throughput(
        self, project: dict[str, Project], chunk: dict[str, list[RawMessage]], sides: list[str]
    ) -> dict[str, float]:
        """Each side's events of this round in two halves, A B B A."""
        spent = dict.fromkeys(_SIDES, 0.0)
        half = len(chunk[sides[0]]) // 2
        for part, order in ((slice(None, half), sides), (slice(half, None), sides[::-1])):
            for side in order:
                messages = chunk[side][part]
                for start in range(0, len(messages), BATCH_SIZE):
                    t0 = time.perf_counter()
                    await project[side](messages[start : start + BATCH_SIZE])
                    spent[side] += time.perf_counter() - t0
        events = len(chunk[sides[0]])
        self._projected += events
        for side in _SIDES:
            self._spent[side] += spent[side]
        return {f"{side}_events_per_s": round(events / spent[side], 1) for side in _SIDES}

    async def _freshness(
        self, fresh: _Fresh, sides: list[str], *, timed: bool = True
    ) -> dict[str, float]:
        """`fresh` turns per side, one at a time, the sides alternating turn by turn (one turn
        per side, kept out of the figures, when not `timed`: the warm-up)."""
        sizes = self._sizes
        latency: dict[str, list[float]] = {side: [] for side in _SIDES}
        count = sizes.fresh if timed else 1
        for n, event in enumerate(turns(count, self._embedder.model_id, tenants=sizes.tenants)):
            for side in sides if n % 2 == 0 else sides[::-1]:
                await fresh.publishers[side].publish([event])
                sent = time.perf_counter()
                read = await _read(fresh.consumers[side], 1, sizes.timeout_s)
                await fresh.project[side](read)
                latency[side].append(time.perf_counter() - sent)
        out: dict[str, float] = {}
        if not timed:
            return out
        for side in _SIDES:
            self._fresh[side] += latency[side]
            out[f"{side}_freshness_p50_ms"] = Latency.of_seconds(latency[side]).p50_ms
        return out

    def _recall_round(self, n: int) -> dict[str, float]:
        """`queries` per way of asking, each query in the next order of the ways."""
        # Every order in turn, not a rotation of one: a rotation keeps who follows whom (the
        # routed and direct one-shard recallers share a client), which could favour one way.
        orders = list(itertools.permutations(self._recallers))
        timings: dict[str, list[float]] = {way: [] for way in self._recallers}
        for q in range(self._sizes.queries):
            tenant, text = self._queries.next()
            for way in orders[(n + q) % len(orders)]:
                t0 = time.perf_counter()
                self._recallers[way].recall(tenant, text)
                timings[way].append(time.perf_counter() - t0)
        out = {}
        for way, values in timings.items():
            self._recall[way] += values
            out[f"{way}_p99_ms"] = Latency.of_seconds(values).p99_ms
        return out

    def pooled(self) -> dict[str, float]:
        """Every round's samples together: rates over all events, percentiles over all turns
        and queries of a side."""
        out: dict[str, float] = {"events_per_side": self._projected}
        for side in _SIDES:
            fresh = Latency.of_seconds(self._fresh[side])
            out[f"{side}_events_per_s"] = round(self._projected / self._spent[side], 1)
            out[f"{side}_freshness_p50_ms"] = fresh.p50_ms
            out[f"{side}_freshness_p99_ms"] = fresh.p99_ms
            out["fresh_turns_per_side"] = fresh.count
        for way, values in self._recall.items():
            latency = Latency.of_seconds(values)
            out[f"{way}_p50_ms"] = latency.p50_ms
            out[f"{way}_p99_ms"] = latency.p99_ms
            out["queries_per_way"] = latency.count
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class _Fresh:
    """Freshness's sides: each one's publisher, consumer and projection."""

    publishers: dict[str, EventPublisher]
    consumers: dict[str, AIOKafkaConsumer]
    project: dict[str, Project]


async def _sides(namespaces: dict[str, BenchNamespace]) -> dict[str, Project]:
    return {
        "sharded": await _sharded_side(namespaces["sharded"]),
        "unsharded": await _unsharded_side(namespaces["unsharded"]),
    }


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


async def _started(stack: contextlib.AsyncExitStack, ns: BenchNamespace) -> AIOKafkaConsumer:
    """A group-less consumer of the namespace's memory topic from its start, stopped with
    `stack`."""
    consumer = AIOKafkaConsumer(
        ns.topics.memory,
        **ns.kafka.aiokafka(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=BATCH_SIZE,
    )
    await consumer.start()
    stack.push_async_callback(consumer.stop)
    return consumer


async def _read(consumer: AIOKafkaConsumer, count: int, timeout_s: float) -> list[RawMessage]:
    messages: list[RawMessage] = []
    deadline = time.monotonic() + timeout_s
    while len(messages) < count:
        if time.monotonic() > deadline:
            raise MemstreamError(f"read {len(messages)} of {count} records in {timeout_s:.0f}s")
        batches = await consumer.getmany(timeout_ms=200, max_records=count - len(messages))
        messages += [RawMessage.of(r) for records in batches.values() for r in records]
    return messages


# -- recall -------------------------------------------------------------------------------------


class _GivenVectors:
    """An embedder whose query vector is the one the bench set (`next`): recall's search,
    fusion and routing are timed, not the model."""

    model_id = RANDOM_VECTORS_MODEL

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.next: Vectors = np.zeros(dims, dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:  # pragma: no cover
        raise AssertionError("the scale bench seeds its own vectors")

    def embed_query(self, text: str) -> Vectors:
        return self.next


class _Queries:
    """The queries, the same sequence every run: a tenant, three words, and a random unit
    vector handed to `_GivenVectors` for the recall that follows."""

    def __init__(self, given: _GivenVectors, sizes: RatioSizes) -> None:
        self._given = given
        self._tenants = sizes.tenants
        self._vectors = np.random.default_rng(11)
        self._words = random.Random(11)

    def next(self) -> tuple[TenantId, str]:
        vector = self._vectors.standard_normal(self._given.dims).astype(np.float32)
        self._given.next = vector / np.linalg.norm(vector)
        tenant = validate_tenant(f"tenant-{self._words.randrange(self._tenants)}")
        return tenant, " ".join(self._words.choices(_VOCABULARY, k=3))


def _seed(ns: BenchNamespace, sizes: RatioSizes, progress: Progress) -> None:
    """`sizes.memories` memories over `sizes.tenants` tenants, each written to its tenant's
    shard through the projection's writer (the same vectors in every namespace)."""
    rng = np.random.default_rng(5)
    words = random.Random(5)
    at = datetime.now(UTC)
    events = [
        seeded_message(i, sizes.tenants, " ".join(words.choices(_VOCABULARY, k=12)), at)
        for i in range(sizes.memories)
    ]
    vectors = rng.standard_normal((sizes.memories, _DIMS)).astype(np.float32)
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
            await writer.ensure_live_index(RANDOM_VECTORS_MODEL, _DIMS)
            for start in range(0, len(batch), 500):
                await writer.apply(batch[start : start + 500])
                done = min(start + 500, len(batch))
                progress.tick(f"memories seeded on shard {shard}", done, len(batch))

    asyncio.run(write())
