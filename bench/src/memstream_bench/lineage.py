"""`bench lineage`: what lineage (docs/lineage.md) costs, with against without, same run.

- **hook**: two agents with the memory middleware recording every turn, interleaved turn by
  turn (the order alternating) so noise hits both alike: one records what the turn was shown
  (12 memory ids, recall's default k), the other records nothing shown — the bench-only
  switch, a middleware whose turns were shown nothing. Recall itself is off on both: it is
  the same work with or without lineage. Turn p50 and p99.
- **projection**: the projector's write path on the same turns, vectors precomputed: stamping
  each memory (with its provenance, or without) and applying the batch in Redis with the
  real writer, into two keyspaces, batch by batch alternating. Memories/s, the median of
  the batches' rates.
- **bytes**: Redis's MEMORY USAGE of every memory hash written above, mean per memory, with
  the provenance field against without (the search index holds no lineage: it is not indexed).
Target: ≤ 1.1x each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import time
from typing import cast

import numpy as np

from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.agent.context import RunContext
from memstream.config import Settings
from memstream.hooks import RecordConfig, SemanticMemoryMiddleware
from memstream.memory.embeddings import Embedder
from memstream.memory.events import derive_id, memories_of
from memstream.memory.ports import Embedded
from memstream.memory.provenance import provenance_of
from memstream.projections.schema import Keyspace
from memstream.projections.writer import RedisProjectionWriter
from memstream_bench.corpus import turns as corpus_turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Latency, Progress, ratio

__all__ = ["run_lineage"]

TARGET = "≤ 1.1x without lineage"
_TENANTS = 10
_SHOWN = tuple(derive_id("bench.lineage", i) for i in range(12))
_BATCH = 100


class _ShownTwelve(SemanticMemoryMiddleware):
    """The middleware as it records a turn whose prompt showed 12 memories."""

    def _shown(self, context: RunContext) -> tuple[str, ...]:
        return _SHOWN


def _hook(ns: BenchNamespace, turns: int, progress: Progress) -> tuple[Latency, Latency]:
    answers = ["An answer of a few words."] * (turns + 50)
    agents = [
        Agent(ScriptedModel(answers), middleware=[kind(stores=ns.deployment.stores(),
              client=ScriptedModel([]), record=RecordConfig())])
        for kind in (_ShownTwelve, SemanticMemoryMiddleware)
    ]  # fmt: skip
    for warm in range(50):  # imports, producers, first allocations
        for agent in agents:
            agent.run("warming up", RunConfig(f"warm-{warm}", f"tenant-{warm % _TENANTS}"))
    durations: list[list[float]] = [[], []]
    for i in range(turns):
        question = f"Please remember that my locker number is {i}."
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            config = RunConfig(f"thread-{side}-{i}", f"tenant-{i % _TENANTS}")
            t0 = time.perf_counter()
            agents[side].run(question, config)
            durations[side].append(time.perf_counter() - t0)
        progress.tick("turns", i + 1, turns)
    ns.deployment.stores().publisher.flush(60)
    return Latency.of_seconds(durations[0]), Latency.of_seconds(durations[1])


async def _projection(
    ns: BenchNamespace, events: int, dims: int, model: str, progress: Progress
) -> tuple[dict[str, float], dict[str, float]]:
    """Memories/s of each side's write path, and each side's mean bytes per memory hash."""
    client = ns.projection.async_client()
    sides = {"with": ns.keys, "without": Keyspace(ns.scratch("plain"))}
    writers = {
        side: RedisProjectionWriter(client, keys, max_memories=0, url=ns.settings.redis)
        for side, keys in sides.items()
    }
    for writer in writers.values():
        await writer.ensure_live_index(model, dims)
    log = corpus_turns(events, model)
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((2, dims)).astype(np.float32)
    # Each batch's rate, per side: the median of them resists this machine's bursts of load.
    batch_rates: dict[str, list[float]] = {side: [] for side in sides}
    for start in range(0, len(log), _BATCH):
        chunk = log[start : start + _BATCH]
        order = list(sides) if (start // _BATCH) % 2 == 0 else list(sides)[::-1]
        for side in order:
            t0 = time.perf_counter()
            batch = []
            for offset, event in enumerate(chunk, start):
                # What the projector does to each memory: its model, and here its lineage.
                lineage = (
                    provenance_of(event, "memstream.memory", 3, offset) if side == "with" else None
                )
                memories = tuple(
                    dataclasses.replace(m, embedding_model=model, provenance=lineage)
                    for m in memories_of(event)
                )
                batch.append(Embedded(event, memories, vectors))
            await writers[side].apply(batch)
            batch_rates[side].append(2 * len(chunk) / (time.perf_counter() - t0))
        progress.tick("turns applied (each side)", start + len(chunk), len(log))
    rates = {side: statistics.median(found) for side, found in batch_rates.items()}
    usage: dict[str, float] = {}
    for side, keys in sides.items():
        total, count = 0, 0
        async for key in client.scan_iter(match=f"{keys.at(1).memory_prefix}*", count=1000):
            total += cast(int, await client.memory_usage(key, samples=0))
            count += 1
        usage[side] = total / max(count, 1)
    return rates, usage


def run_lineage(
    settings: Settings, embedder: Embedder, *, turns: int = 10_000, events: int = 4000
) -> BenchResult:
    started = time.monotonic()
    progress = Progress("lineage")
    with BenchNamespace(settings, "lineage-hook", embedder) as ns:
        progress.say(f"hook: {turns} turns each, interleaved")
        hook_with, hook_without = _hook(ns, turns, progress)
    with BenchNamespace(settings, "lineage", embedder) as ns:
        progress.say(f"projection: {events} turns into each keyspace, batches alternating")
        rates, usage = asyncio.run(
            _projection(ns, events, embedder.dims, embedder.model_id, progress)
        )
    without = "without lineage, same run"
    figures = {
        "turns": turns,
        "events": events,
        "shown_ids_per_turn": len(_SHOWN),
        "hook_p50_ms_with": hook_with.p50_ms,
        "hook_p50_ms_without": hook_without.p50_ms,
        "hook_p99_ms_with": hook_with.p99_ms,
        "hook_p99_ms_without": hook_without.p99_ms,
        "hook_p99_ratio": ratio(hook_with.p99_ms, hook_without.p99_ms),
        "projection_memories_per_s_with": round(rates["with"], 1),
        "projection_memories_per_s_without": round(rates["without"], 1),
        "projection_slowdown": ratio(rates["without"], rates["with"]),
        "bytes_per_memory_with": round(usage["with"], 1),
        "bytes_per_memory_without": round(usage["without"], 1),
        "bytes_ratio": ratio(usage["with"], usage["without"]),
        "dims": embedder.dims,
    }
    return BenchResult(
        name="lineage",
        figures=figures,
        comparisons=[
            Comparison("turn p50", hook_with.p50_ms, hook_without.p50_ms, "ms", without, False),
            Comparison(
                "turn p99", hook_with.p99_ms, hook_without.p99_ms, "ms", without, False, TARGET
            ),
            Comparison(
                "projection write path (vectors precomputed)",
                figures["projection_memories_per_s_with"],
                figures["projection_memories_per_s_without"],
                "memories/s",
                without,
                True,
                TARGET,
            ),
            Comparison(
                "Redis bytes per memory (hash)",
                figures["bytes_per_memory_with"],
                figures["bytes_per_memory_without"],
                "bytes",
                without,
                False,
                TARGET,
            ),
        ],
        notes=[
            f"hook: {len(_SHOWN)} shown ids recorded per turn against none, recall off on both; "
            "projection: stamping and applying only (vectors precomputed, so the embedder, "
            f"which dominates a real worker, does not hide the cost); {embedder.dims}-dim "
            "vectors in the hashes"
        ],
        seconds=time.monotonic() - started,
    )
