"""`bench throughput`: turns/s one worker projects end to end, against a raw pipeline, in rounds.

Each round measures three things back to back, on fresh turns, so a ratio's two
sides run seconds apart and the machine's drift weighs on both (one long run of each side came
out 0.83-1.05 from run to run):
- memstream: a `memstream worker` process, started and caught up, then the N turns published
  at once; the clock runs from the first publish (the producer already connected) until every
  turn is applied (and so recallable);
- raw: the worker stopped, N other fresh turns published while `raw.RawPipeline` reads them
  — plain consumer, the same embedder and batches, pipelined HSETs into an identically
  indexed keyspace — timed the same way, from the first publish to its last write; its
  consumer goes on from the topic's end, and the next round's worker projects these turns
  before its clock starts;
- the embedder alone on the same texts: both pipelines embed every memory, so on a CPU
  embedder neither can be faster than it.
Reported: each ratio's median over the rounds with its range, and each side's turns/s over all
rounds together; and the CPU each side spent a turn (its processes' CPU time: memstream's
worker and the bench's own process, which publishes and polls; raw's one process, which
publishes and projects; the embedder's), steadier than wall time on a shared machine, where a
round's ratio moves by ±10 % with how fast the machine runs those seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from memstream.config import Settings
from memstream.errors import MemstreamError
from memstream.memory.embeddings import Embedder
from memstream.memory.events import TurnCompleted, memories_of
from memstream.projections.schema import VectorType
from memstream_bench.corpus import turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.raw import RawPipeline
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Progress, Spread, process_cpu_s, ratio

__all__ = ["run_throughput"]

TARGET = "≥ 0.7x raw"


def run_throughput(
    settings: Settings,
    embedder: Embedder,
    *,
    count: int = 600,
    rounds: int = 5,
    timeout_s: float = 300,
) -> BenchResult:
    started = time.monotonic()
    progress = Progress("throughput")
    timed: list[tuple[float, float, float]] = []  # seconds a round: ours, raw, embedder
    redis_cpu = {"memstream": 0.0, "raw": 0.0}  # the Redis server's CPU seconds, each side
    # CPU seconds of the sides' own processes: the worker, the bench's (publishing, polling
    # and, for raw, projecting), the embedder's.
    cpu = {"worker": 0.0, "memstream": 0.0, "raw": 0.0, "embedder": 0.0}
    with BenchNamespace(settings, "tput") as ns:
        pipeline = RawPipeline(
            ns.kafka,
            ns.topics.memory,
            ns.projection.connection,
            ns.settings.namespace,
            embedder,
            VectorType(ns.settings.vector_type),
            ns.deployment.keyring(),
        )

        async def projected_s(events: Sequence[TurnCompleted], *, raw: bool = False) -> float:
            """Seconds from publishing `events` until they are projected: by the worker, or
            with `raw` by the raw pipeline, reading as they are published. The producer is
            connected before the clock starts: its start is no projection's work."""
            async with ns.deployment.event_publisher() as publisher:
                started = time.perf_counter()
                reading = (
                    asyncio.create_task(pipeline.run(len(events), timeout_s, clock_from=started))
                    if raw
                    else None
                )
                for low in range(0, len(events), 500):
                    await publisher.publish(events[low : low + 500])
            if reading is None:
                await asyncio.to_thread(ns.wait_applied, events, timeout_s)
                return time.perf_counter() - started
            run = await reading
            if run.records < len(events):
                raise MemstreamError(
                    f"the raw pipeline wrote {run.records} of {len(events)} turns "
                    f"within {timeout_s:.0f}s"
                )
            return run.seconds

        async def measure() -> None:
            await pipeline.start(from_start=False)
            raw_turns: list[TurnCompleted] = []
            try:
                for n in range(rounds):
                    events = turns(count, embedder.model_id)
                    progress.say(f"round {n + 1}/{rounds}: {count} turns, memstream's worker")
                    # The namespace's own helpers run loops of their own: off this one.
                    probe = turns(1, embedder.model_id, tenants=1)[0]
                    await asyncio.to_thread(ns.start_worker, probe)
                    # The raw side's turns of the round before are in the log too: the worker
                    # projects them before the clock starts.
                    await asyncio.to_thread(ns.wait_applied, raw_turns, timeout_s)
                    redis_before = _redis_cpu_s(ns)
                    worker_before, own_before = process_cpu_s(ns.worker_pid), time.process_time()
                    ours_s = await projected_s(events)
                    worker_s = process_cpu_s(ns.worker_pid) - worker_before
                    cpu["worker"] += worker_s
                    cpu["memstream"] += worker_s + time.process_time() - own_before
                    redis_cpu["memstream"] += _redis_cpu_s(ns) - redis_before
                    await asyncio.to_thread(ns.stop_worker)
                    progress.say(f"round {n + 1}/{rounds}: the raw pipeline")
                    # Raw runs as the worker did: reading while fresh turns are published.
                    await pipeline.skip_to_end()
                    raw_turns = turns(count, embedder.model_id)
                    redis_before, own_before = _redis_cpu_s(ns), time.process_time()
                    raw_s = await projected_s(raw_turns, raw=True)
                    cpu["raw"] += time.process_time() - own_before
                    redis_cpu["raw"] += _redis_cpu_s(ns) - redis_before
                    texts = [m.content for e in events for m in memories_of(e)]
                    t0, own_before = time.perf_counter(), time.process_time()
                    embedder.embed_documents(texts)
                    timed.append((ours_s, raw_s, time.perf_counter() - t0))
                    cpu["embedder"] += time.process_time() - own_before
            finally:
                await pipeline.stop()

        asyncio.run(measure())

    ours_s, raw_s, embed_s = (sum(side) for side in zip(*timed, strict=True))
    total = count * rounds
    ours, base, embed_rate = total / ours_s, total / raw_s, total / embed_s
    to_raw = Spread.of([raw / mine for mine, raw, _ in timed])
    to_embedder = Spread.of([alone / mine for mine, _, alone in timed])
    cpu_ms = {side: round(1000 * seconds / total, 3) for side, seconds in cpu.items()}
    return BenchResult(
        name="throughput",
        figures={
            "turns": count,
            "rounds": rounds,
            "memories": 2 * total,
            "turns_per_s": round(ours, 1),
            "raw_turns_per_s": round(base, 1),
            # The figures a target compares: the median of the rounds' ratios.
            "ratio": to_raw.median,
            "ratio_min": to_raw.low,
            "ratio_max": to_raw.high,
            "pooled_ratio": ratio(ours, base),
            "embedder_turns_per_s": round(embed_rate, 1),
            "embedder_texts_per_s": round(2 * embed_rate, 1),
            "ratio_to_embedder": to_embedder.median,
            "ratio_to_embedder_min": to_embedder.low,
            "ratio_to_embedder_max": to_embedder.high,
            # What Redis's work took of the two cores the embedder needs, a turn each side.
            "redis_cpu_ms_per_turn": round(1000 * redis_cpu["memstream"] / total, 3),
            "raw_redis_cpu_ms_per_turn": round(1000 * redis_cpu["raw"] / total, 3),
            # Each side's own processes' CPU a turn (module docstring); the worker's alone too.
            "cpu_ms_per_turn": cpu_ms["memstream"],
            "worker_cpu_ms_per_turn": cpu_ms["worker"],
            "raw_cpu_ms_per_turn": cpu_ms["raw"],
            "embedder_cpu_ms_per_turn": cpu_ms["embedder"],
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
            f"the embedder alone does {embed_rate:.0f} turns/s ({2 * embed_rate:.0f} texts/s)",
            f"memstream / raw by round: {to_raw}; memstream / the embedder: {to_embedder} "
            "(the rows above: every round's turns together)",
            f"CPU a turn, each side's own processes: memstream {cpu_ms['memstream']:.2f} ms "
            f"(its worker {cpu_ms['worker']:.2f}), raw {cpu_ms['raw']:.2f} ms, the embedder "
            f"alone {cpu_ms['embedder']:.2f} ms",
        ],
        seconds=time.monotonic() - started,
    )


def _redis_cpu_s(ns: BenchNamespace) -> float:
    """The Redis server's CPU seconds so far (user and system, every thread)."""
    cpu = ns.redis.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
