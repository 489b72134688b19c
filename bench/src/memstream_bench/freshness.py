"""`bench freshness`: from publish returning to the memory being recallable, p50 and p99.

Two loads, each for memstream (a `memstream worker` process) and then for the raw pipeline
(`raw.RawPipeline` in this process, the worker stopped), in rounds (five by default): a
round is both sides back to back, so a ratio's two sides run seconds apart and the machine's
drift weighs on both. One round alone came out anywhere from 0.35x to 3.8x at high load on
the same code (docs/benchmarks.md); the median of the rounds' ratios is the figure a target
compares, with its range, and the rows pool every round's latencies. Five rounds, not three:
a round's high-load ratio still ranged 0.26-3.07 on 2 shared cores, and a median of three
swung with it.

- light: one turn at a time, the next sent 100 ms after the previous became visible;
- high: turns sent one per publish (as agents do) at a steady rate for a few seconds; the
  rate defaults to 60 % of what the embedder alone manages here on a large batch, measured
  first. The pipeline costs more than its embedding (the bench's own publishing and polling,
  Kafka, Redis): on 2 cores that rate keeps the machine 60-80 % busy for the raw pipeline
  (`raw_high_machine_cpu_ms_per_turn` times the rate), near where waiting grows fast, so a
  little more CPU a turn shows as much more latency.

"Recallable" is polled every millisecond (light) or two (high): memstream's applied marker,
written in the same Lua call as the memory hashes (so marker present means the index has the
memory), and for the raw pipeline the memory's hash key. A poll is one script call for every
pending turn: a pipeline of one command a turn cost 0.09 ms of the bench's CPU with one
pending and 0.40 ms with twenty, so a side that fell behind lost ever more of the two cores to
its own measurement; the script costs 0.09 and 0.13 ms.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from memstream.config import Settings
from memstream.memory.embeddings import Embedder
from memstream.memory.events import TurnCompleted, memories_of
from memstream.projections.schema import VectorType
from memstream.streams.event_publisher import EventPublisher
from memstream_bench.corpus import turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.raw import RawPipeline
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Latency, Progress, Spread, machine_cpu_s, ratio

__all__ = ["run_freshness"]

# What shows a turn recallable: a key, and the hash field it must hold ("": the key must exist).
Probe = tuple[str, str]
Visible = Callable[[Sequence[Probe]], Awaitable[list[bool]]]

# Whether each key (KEYS[i]) holds ARGV[i] as a hash field, or exists when ARGV[i] is empty.
_PRESENT = """
local found = {}
for i, key in ipairs(KEYS) do
  if ARGV[i] == '' then
    found[i] = redis.call('EXISTS', key)
  else
    found[i] = redis.call('HEXISTS', key, ARGV[i])
  end
end
return found
"""


async def _light(
    publisher: EventPublisher,
    events: Sequence[TurnCompleted],
    probes: Sequence[Probe],
    visible: Visible,
    gap_s: float,
) -> list[float]:
    latencies = []
    for event, probe in zip(events, probes, strict=True):
        await publisher.publish([event])
        sent = time.perf_counter()
        # Polling is the point: the state changes in another process, not in this loop.
        while not (await visible([probe]))[0]:  # noqa: ASYNC110
            await asyncio.sleep(0.001)
        latencies.append(time.perf_counter() - sent)
        await asyncio.sleep(gap_s)
    return latencies


async def _high(
    publisher: EventPublisher,
    events: Sequence[TurnCompleted],
    probes: Sequence[Probe],
    visible: Visible,
    rate: float,
) -> list[float]:
    sent: dict[int, float] = {}
    seen: dict[int, float] = {}
    pending: set[int] = set()

    async def send() -> None:
        start = time.perf_counter()
        for i, event in enumerate(events):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await publisher.publish([event])
            sent[i] = time.perf_counter()
            pending.add(i)

    sender = asyncio.create_task(send())
    while len(seen) < len(events):
        if pending:
            polled = list(pending)
            flags = await visible([probes[i] for i in polled])
            now = time.perf_counter()
            for i, flag in zip(polled, flags, strict=True):
                if flag:
                    seen[i] = now
                    pending.discard(i)
        await asyncio.sleep(0.002)
    await sender
    return [seen[i] - sent[i] for i in range(len(events))]


def run_freshness(
    settings: Settings,
    embedder: Embedder,
    *,
    light_count: int = 30,
    high_seconds: float = 6.0,
    rate: float | None = None,
    rounds: int = 5,
    timeout_s: float = 600,
) -> BenchResult:
    started = time.monotonic()
    progress = Progress("freshness")
    sample = turns(64, embedder.model_id)
    t0 = time.perf_counter()
    embedder.embed_documents([m.content for e in sample for m in memories_of(e)])
    embedder_rate = len(sample) / (time.perf_counter() - t0)
    rate = rate or max(2.0, round(0.6 * embedder_rate))
    high_count = max(10, int(rate * high_seconds))
    progress.say(f"embedder alone: {embedder_rate:.0f} turns/s; high load: {rate:.0f} turns/s")
    # Each round's latencies, by side and load, in seconds.
    timed: list[dict[tuple[str, str], list[float]]] = []
    # Each round's CPU of the whole machine a turn of high load, by side, in milliseconds.
    costs: list[dict[str, float]] = []

    with BenchNamespace(settings, "fresh") as ns:
        pipeline = RawPipeline(
            ns.kafka,
            ns.topics.memory,
            ns.projection.connection,
            ns.settings.namespace,
            embedder,
            VectorType(ns.settings.vector_type),
            ns.deployment.keyring(),
        )

        def batch(n: int) -> list[TurnCompleted]:
            return turns(n, embedder.model_id, tenants=50)

        async def phase(
            probe: Callable[[TurnCompleted], Probe], visible: Visible, side: str, n: int
        ) -> list[TurnCompleted]:
            """One side's light and then high load, into this round's `timed`; the turns."""
            light_turns, high_turns = batch(light_count), batch(high_count)
            async with EventPublisher(ns.kafka, ns.topics) as publisher:
                progress.say(f"round {n}/{rounds}: {side}, {light_count} turns one at a time")
                light = [probe(turn) for turn in light_turns]
                timed[-1][side, "light"] = await _light(publisher, light_turns, light, visible, 0.1)
                progress.say(f"round {n}/{rounds}: {side}, {high_count} turns at {rate:.0f}/s")
                high = [probe(turn) for turn in high_turns]
                before = machine_cpu_s()
                timed[-1][side, "high"] = await _high(publisher, high_turns, high, visible, rate)
                costs[-1][side] = 1000 * (machine_cpu_s() - before) / high_count
            return light_turns + high_turns

        async def measure() -> None:
            client = ns.projection.async_client()
            present = await client.script_load(_PRESENT)

            async def visible(probes: Sequence[Probe]) -> list[bool]:
                keys, fields = zip(*probes, strict=True)
                flags = await client.evalsha(present, len(keys), *keys, *fields)
                return [bool(flag) for flag in flags]

            def applied(turn: TurnCompleted) -> Probe:
                return ns.keys.applied(turn.tenant), turn.id

            def written(turn: TurnCompleted) -> Probe:
                last = memories_of(turn)[-1]
                return pipeline.memory_key(last.tenant, last.id), ""

            await pipeline.start(from_start=False)
            raw_turns: list[TurnCompleted] = []
            try:
                for n in range(1, rounds + 1):
                    timed.append({})
                    costs.append({})
                    progress.say(f"round {n}/{rounds}: starting a worker")
                    probe = turns(1, embedder.model_id, tenants=1)[0]
                    await asyncio.to_thread(ns.start_worker, probe)
                    # The raw side's turns of the round before are in the log too: the worker
                    # projects them before its clock starts.
                    await asyncio.to_thread(ns.wait_applied, raw_turns, timeout_s)
                    await phase(applied, visible, "memstream", n)
                    await asyncio.to_thread(ns.stop_worker)
                    await pipeline.skip_to_end()
                    expected = light_count + high_count
                    runner = asyncio.create_task(pipeline.run(expected, timeout_s=timeout_s))
                    try:
                        raw_turns = await phase(written, visible, "raw", n)
                    finally:
                        runner.cancel()
                        await asyncio.gather(runner, return_exceptions=True)
            finally:
                await pipeline.stop()
                await client.aclose()

        asyncio.run(measure())

    figures: dict[str, object] = {
        "high_rate_turns_per_s": rate,
        "embedder_turns_per_s": round(embedder_rate, 1),
        "rounds": rounds,
        # What a turn of high load cost every process on the machine (the bench's publishing
        # and polling, Kafka and Redis included): near saturation, a little more CPU a turn is
        # a lot more waiting.
        "high_machine_cpu_ms_per_turn": Spread.of([c["memstream"] for c in costs]).median,
        "raw_high_machine_cpu_ms_per_turn": Spread.of([c["raw"] for c in costs]).median,
    }
    comparisons = []
    for load in ("light", "high"):
        # Pooled over the rounds: the rows' figures; the ratios a target compares are the
        # median of the rounds' own (each round's two sides run seconds apart).
        ours = Latency.of_seconds([s for r in timed for s in r["memstream", load]])
        raw = Latency.of_seconds([s for r in timed for s in r["raw", load]])
        by_round = [
            (Latency.of_seconds(r["memstream", load]), Latency.of_seconds(r["raw", load]))
            for r in timed
        ]
        p50 = Spread.of([ratio(o.p50_ms, b.p50_ms) for o, b in by_round])
        p99 = Spread.of([ratio(o.p99_ms, b.p99_ms) for o, b in by_round])
        figures[load] = {
            "p50_ms": ours.p50_ms,
            "p99_ms": ours.p99_ms,
            "raw_p50_ms": raw.p50_ms,
            "raw_p99_ms": raw.p99_ms,
            "p50_ratio": p50.median,
            "p50_ratio_min": p50.low,
            "p50_ratio_max": p50.high,
            "p99_ratio": p99.median,
            "p99_ratio_min": p99.low,
            "p99_ratio_max": p99.high,
            "samples": ours.count,
        }
        for stat in ("p50", "p99"):
            comparisons.append(
                Comparison(
                    f"{load} load {stat}",
                    getattr(ours, f"{stat}_ms"),
                    getattr(raw, f"{stat}_ms"),
                    "ms",
                    "raw consume+embed+HSET",
                    False,
                )
            )
    return BenchResult(
        name="freshness",
        figures=figures,
        comparisons=comparisons,
        notes=[
            "time from publish returning to recallable; the raw pipeline runs in-process",
            f"{rounds} rounds, each memstream then raw; the rows pool the rounds, the figures' "
            "ratios are the median of the rounds' own",
        ],
        seconds=time.monotonic() - started,
    )
