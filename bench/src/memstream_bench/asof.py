"""`bench asof`: what lineage costs on a long log — a tenant's memory as of a moment (first
answer and repeated), a memory's history, and what a run's turns were shown (`explain`) —
against the targets of issue 24.

The log: `events` events in a fresh namespace, `tenant_share` of them the measured tenant's
(saves of `memories` * 3/2 ids, so ids are saved again — edits — and the tenant's bound of
`memories` evicts; a forget by id every 50th event, a consolidation of its two latest saves
every 200th, a turn of run `asof-run` shown its two latest saves every 100th), the rest
spread over other tenants, sealed as the deployment's defaults seal them. The live projection
is built by the real Replayer, so the as-of view finds the stored vectors of the memories that
still stand.

Texts come from a small vocabulary (2,000 texts, or as many as the log has events) embedded
once up front with the configured model, and the bench's deployment embeds by looking them
up (`replay.PrecomputedEmbedder`): the projection of the whole log then costs minutes, not
hours, on a laptop. The as-of figures
count how many of the view's vectors were reused and how many embedded (a lookup here; the
model's time per memory elsewhere: docs/benchmarks.md).

Each answer is timed first (a lineage of its own: the tenant's partition read, decoded and
folded) and repeated (the lineage kept: a copy of the fold at the cut, or nothing). The raw
baseline, in the same run: a plain consumer reading the tenant's partition to its end with
the same fetch sizes (no decode, no fold) — the least any answer from the log must cost. The
first answer's CPU seconds are reported too: on a shared machine they say more than its wall
time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from aiokafka import AIOKafkaConsumer, TopicPartition

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.memory.embeddings import Embedder
from memstream.memory.events import (
    MemoriesConsolidated,
    MemoryEvent,
    MemoryForgotten,
    MemorySaved,
    MessageRecorded,
    TurnCompleted,
)
from memstream.memory.model import Memory, MemoryType
from memstream.memory.shown import turns_shown
from memstream.streams.kafka import KafkaConnection
from memstream.streams.lineage import FETCH_BYTES, Lineage
from memstream_bench.corpus import conversation_texts
from memstream_bench.harness import BenchNamespace
from memstream_bench.replay import PrecomputedEmbedder, replay_run
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Progress

__all__ = ["run_asof"]

TENANT = "asof-tenant"
RUN = "asof-run"
FIRST_TARGET = "≤ 2 s"
REPEATED_TARGET = "≤ 50 ms"
VOCABULARY = 2000


def _texts(count: int) -> list[str]:
    try:
        found = sorted(set(conversation_texts(limit=count * 2)))[:count]
    except OSError:
        found = []
    return found or [f"fact {n}: the {n}th thing worth keeping" for n in range(count)]


def _log(
    events: int, tenant_share: float, memories: int, texts: list[str], model: str
) -> tuple[list[MemoryEvent], int]:
    """The whole log in publishing order, and how many of its events are the tenant's."""
    rng = random.Random(24)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = max(memories * 3 // 2, 2)
    every = max(round(1 / tenant_share), 1) if tenant_share > 0 else events + 1
    log: list[MemoryEvent] = []
    ours, recent = 0, ["", ""]
    for n in range(events):
        at = start + timedelta(seconds=n)
        if n % every:
            log.append(
                MessageRecorded(
                    f"other-{n % 50}", "t", str(n), rng.choice(texts), "user", at, 0.5, model
                )
            )
            continue
        ours += 1
        if ours % 50 == 0:
            forgotten = (f"m{rng.randrange(ids)}",)
            log.append(MemoryForgotten(TENANT, f"f{n}", at, memory_ids=forgotten))
        elif ours % 100 == 75:
            turn = TurnCompleted(
                TENANT, "t", RUN, ours, rng.choice(texts), rng.choice(texts), at, 0.5, model,
                shown=tuple(recent),
            )  # fmt: skip
            log.append(turn)
        elif ours % 200 == 1 and recent[0] and recent[0] != recent[1]:
            summary = rng.choice(texts)
            kind = MemoryType.USER_FACT
            log.append(
                MemoriesConsolidated(TENANT, tuple(recent), summary, kind, "t", at, 0.6, model)
            )
        else:
            memory_id, text = f"m{rng.randrange(ids)}", rng.choice(texts)
            recent = [recent[1], memory_id]
            importance = rng.choice((0.3, 0.5, 0.7))
            saved = MemorySaved(
                TENANT, memory_id, "t", text, MemoryType.USER_FACT, "user", at, importance, model
            )
            log.append(saved)
    return log, ours


async def _raw_read(kafka: KafkaConnection, topic: str, partition: int) -> float:
    """Seconds a plain consumer takes to read one partition to its end."""
    tp = TopicPartition(topic, partition)
    consumer = AIOKafkaConsumer(
        **kafka.aiokafka(),
        group_id=None,
        enable_auto_commit=False,
        max_partition_fetch_bytes=FETCH_BYTES,
        fetch_max_bytes=FETCH_BYTES,
    )
    await consumer.start()
    try:
        first = time.perf_counter()
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        while await consumer.position(tp) < end:
            await consumer.getmany(tp, timeout_ms=500, max_records=10_000)
        return time.perf_counter() - first
    finally:
        await consumer.stop()


def _timed(work: Callable[[], object]) -> float:
    first = time.perf_counter()
    work()
    return time.perf_counter() - first


def _cpu(work: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of `work` (this process's CPU, its threads included)."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def _p50_ms(work: Callable[[], object], repeats: int) -> tuple[float, float]:
    """The median and the slowest of `repeats` runs of `work`, in milliseconds."""
    times = sorted(_timed(work) for _ in range(repeats))
    return times[len(times) // 2] * 1000, times[-1] * 1000


def run_asof(
    settings: Settings,
    embedder: Embedder,
    *,
    events: int = 100_000,
    memories: int = 1000,
    tenant_share: float = 0.2,
    repeats: int = 20,
) -> BenchResult:
    started = time.monotonic()
    progress = Progress("asof")
    texts = _texts(min(VOCABULARY, events))
    progress.say(f"embedding the vocabulary of {len(texts)} texts once")
    vectors = dict(zip(texts, embedder.embed_documents(texts), strict=True))
    cached = PrecomputedEmbedder(embedder.model_id, vectors, embedder.dims)
    bounded = dataclasses.replace(settings, max_memories_per_tenant=memories)
    with BenchNamespace(bounded, "asof", cached) as ns:
        log, ours = _log(events, tenant_share, memories, texts, embedder.model_id)
        cut = int(len(log) * 0.9)
        progress.say(f"writing {len(log)} events ({ours} of the tenant's) to the log")
        ns.publish(log[:cut])
        moment = datetime.now(UTC)
        ns.publish(log[cut:])
        progress.say("building the live projection with the real Replayer")
        asyncio.run(replay_run(ns.deployment, reembed=False, progress=progress))

        partition = ns.deployment.partition_of(TENANT)
        partitions = ns.settings.partitions
        raw_s = asyncio.run(_raw_read(ns.kafka, ns.topics.memory, partition))

        def fresh() -> Lineage:
            # A lineage that has read nothing yet: what a new process (the CLI) starts from.
            deployment = ns.deployment.with_namespace(ns.settings.namespace)
            deployment.embedders = ns.deployment.embedders
            lineages.append(deployment)
            return deployment.lineage()

        lineages: list[Deployment] = []
        lineage = ns.deployment.lineage()
        question = texts[0]
        first_s, first_cpu_s = _cpu(lambda: lineage.recall(TENANT, question, at=moment, k=5))
        repeated = _p50_ms(lambda: lineage.recall(TENANT, question, at=moment, k=5), repeats)
        tenant_log = lineage.log(TENANT)
        view = tenant_log.view(tenant_log.cutoff(moment))
        stored = asyncio.run(_stored_count(ns.deployment, view))
        touched = max(tenant_log.touches, key=lambda i: len(tenant_log.touches[i]))
        history_first_s = _timed(lambda: fresh().history(TENANT, touched))
        history = _p50_ms(lambda: lineage.history(TENANT, touched), repeats)
        # `memstream explain --run asof-run`: every turn of the run traced through the log.
        shown = fresh()
        explain_first_s = _timed(lambda: turns_shown(shown.log(TENANT).events, RUN))
        explain = _p50_ms(lambda: turns_shown(shown.log(TENANT).events, RUN), repeats)
        explained = len(turns_shown(tenant_log.events, RUN))
        for deployment in lineages:
            deployment.close()

    figures: dict[str, float | int | None] = {
        "events": len(log),
        "tenant_events": ours,
        "tenant_events_read": len(tenant_log.events),
        "view_memories": len(view),
        "vectors_reused": stored,
        "vectors_embedded": len(view) - stored,
        "first_s": round(first_s, 3),
        "first_cpu_s": round(first_cpu_s, 3),
        "repeated_p50_ms": round(repeated[0], 2),
        "repeated_max_ms": round(repeated[1], 2),
        "history_first_s": round(history_first_s, 3),
        "history_repeated_p50_ms": round(history[0], 3),
        "explain_first_s": round(explain_first_s, 3),
        "explain_repeated_p50_ms": round(explain[0], 2),
        "explained_turns": explained,
        "raw_partition_read_s": round(raw_s, 3),
    }
    raw_ms = raw_s * 1000
    baseline = "plain consumer reading the tenant's partition to its end"
    return BenchResult(
        name="asof",
        figures=figures,
        comparisons=[
            Comparison(
                "recall --as-of, first answer (log read, fold, vectors)",
                round(first_s, 3),
                round(raw_s, 3),
                "s",
                baseline,
                False,
                FIRST_TARGET,
            ),
            Comparison(
                "recall --as-of, repeated (p50)",
                round(repeated[0], 2),
                round(raw_ms, 1),
                "ms",
                baseline,
                False,
                REPEATED_TARGET,
            ),
            Comparison(
                "history of the most-touched memory, first (log read and fold)",
                round(history_first_s, 3),
                round(raw_s, 3),
                "s",
                baseline,
                False,
            ),
            Comparison(
                "history, repeated (p50)",
                round(history[0], 3),
                round(raw_ms, 1),
                "ms",
                baseline,
                False,
            ),
            Comparison(
                "explain of a run, first (log read, fold, trace)",
                round(explain_first_s, 3),
                round(raw_s, 3),
                "s",
                baseline,
                False,
            ),
            Comparison(
                "explain of a run, repeated (p50)",
                round(explain[0], 2),
                round(raw_ms, 1),
                "ms",
                baseline,
                False,
            ),
        ],
        notes=[
            f"{ours} of {len(log)} events are the tenant's, all on one of the topic's "
            f"{partitions} partitions with other tenants' records; {len(tenant_log.events)} "
            f"read back; bound {memories}",
            f"as-of view at 90% of the log: {len(view)} memories, {stored} vectors reused "
            f"from the projection, {len(view) - stored} embedded (vocabulary lookups here)",
            f"first answer: {first_s:.2f} s wall, {first_cpu_s:.2f} s CPU in this process",
            f"explain: the {explained} turns of run {RUN!r}, each shown two memories",
        ],
        seconds=time.monotonic() - started,
    )


async def _stored_count(deployment: Deployment, memories: list[Memory]) -> int:
    projection = deployment.projection
    async with projection.session(projection.shard_of(TENANT)) as session:
        found = await session.writer.known_vectors(memories)
    return sum(1 for v in found if v is not None)
