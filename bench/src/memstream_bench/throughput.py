"""`bench throughput`: turns/s one worker projects end to end, against a raw pipeline.

memstream: a `memstream worker` process, idle and caught up, then N turns published at once;
the clock runs from the first publish (the producer already connected) until every turn is
applied (and so recallable).
Raw: the same N turns (still in the topic) read by `raw.RawPipeline` — plain consumer, the
same embedder and batches, pipelined HSETs into an identically indexed keyspace — timed from
its first record; the worker is stopped first so the two never share the CPU.
Beside them, the embedder's own rate on the same texts: both pipelines embed every memory, so
on a CPU embedder neither can be faster than it.
"""

from __future__ import annotations

import asyncio
import time

from memstream.config import Settings
from memstream.memory.embeddings import Embedder
from memstream.memory.events import memories_of
from memstream.projections.schema import VectorType
from memstream_bench.corpus import turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.raw import RawPipeline
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Progress, ratio

__all__ = ["run_throughput"]

TARGET = "≥ 0.7x raw"


def run_throughput(
    settings: Settings, embedder: Embedder, *, count: int = 600, timeout_s: float = 300
) -> BenchResult:
    started = time.monotonic()
    progress = Progress("throughput")
    with BenchNamespace(settings, "tput") as ns:
        events = turns(count, embedder.model_id)
        probe = turns(1, embedder.model_id, tenants=1)[0]
        progress.say("starting a worker")
        ns.start_worker(probe)
        progress.say(f"publishing {count} turns; the worker projects them")

        async def publish() -> float:
            # Connected before the clock starts: the producer's start is no projection's work.
            async with ns.deployment.event_publisher() as publisher:
                started = time.perf_counter()
                for low in range(0, len(events), 500):
                    await publisher.publish(events[low : low + 500])
            return started

        t0 = asyncio.run(publish())
        ns.wait_applied(events, timeout_s, lambda d, t: progress.tick("tenants caught up", d, t))
        ours_s = time.perf_counter() - t0
        ns.stop_worker()

        progress.say("raw pipeline over the same topic")
        pipeline = RawPipeline(
            ns.kafka,
            ns.topics.memory,
            ns.projection.connection,
            ns.settings.namespace,
            embedder,
            VectorType(ns.settings.vector_type),
            ns.deployment.keyring(),
        )

        async def raw() -> float:
            await pipeline.start(from_start=True)
            try:
                # +1: the probe is in the topic too.
                run = await pipeline.run(
                    count + 1, timeout_s, lambda d, t: progress.tick("raw records", d, t)
                )
            finally:
                await pipeline.stop()
            return run.seconds * count / max(run.records - 1, 1)

        raw_s = asyncio.run(raw())

        progress.say("the embedder alone on the same texts")
        texts = [m.content for e in events for m in memories_of(e)]
        t0 = time.perf_counter()
        embedder.embed_documents(texts)
        embed_s = time.perf_counter() - t0

    ours, base, embed_rate = count / ours_s, count / raw_s, count / embed_s
    return BenchResult(
        name="throughput",
        figures={
            "turns": count,
            "memories": 2 * count,
            "turns_per_s": round(ours, 1),
            "raw_turns_per_s": round(base, 1),
            "ratio": ratio(ours, base),
            "embedder_turns_per_s": round(embed_rate, 1),
            "embedder_texts_per_s": round(2 * embed_rate, 1),
            "ratio_to_embedder": ratio(ours, embed_rate),
        },
        comparisons=[
            Comparison(
                "projection throughput",
                round(ours, 1),
                round(base, 1),
                "turns/s",
                "raw consume+embed+HSET",
                True,
                TARGET,
            ),
            Comparison(
                "projection vs embedder alone",
                round(ours, 1),
                round(embed_rate, 1),
                "turns/s",
                "embedder alone",
                True,
            ),
        ],
        notes=[
            "both pipelines embed every memory with the same CPU embedder; "
            f"the embedder alone does {embed_rate:.0f} turns/s ({2 * embed_rate:.0f} texts/s)"
        ],
        seconds=time.monotonic() - started,
    )
