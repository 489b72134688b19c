"""`bench hook`: the time the memory middleware adds to a turn, against the same agent without it.

Both agents run the same scripted model (no network, no LLM), turn after turn, interleaved so
that noise hits both alike; each turn is a new thread of one of a few tenants. memstream's
agent has a SemanticMemoryMiddleware recording every turn (after_agent) on the event-sourced
store: the turn's TurnCompleted is built, journaled (in-process journal) and handed to the
background publisher, which sends it to the bench's Kafka topic while the next turn runs.
Raw: the agent without the middleware. The figure is the difference of the two latency
distributions' p50 and p99 (the target is on p99).
"""

from __future__ import annotations

import time

from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.config import Settings
from memstream.hooks import RecordConfig, SemanticMemoryMiddleware
from memstream.memory.embeddings import Embedder
from memstream_bench.harness import BenchNamespace
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Latency, Progress

__all__ = ["run_hook"]

TARGET = "added p99 ≤ 1 ms"
_TENANTS = 10


def run_hook(settings: Settings, embedder: Embedder, *, turns: int = 2000) -> BenchResult:
    started = time.monotonic()
    progress = Progress("hook")
    with BenchNamespace(settings, "hook", embedder) as ns:
        stores = ns.deployment.stores()
        memory = SemanticMemoryMiddleware(
            stores=stores,
            client=ScriptedModel([]),
            record=RecordConfig(),
            recorder=ns.deployment.recorder(),
        )
        plain = Agent(ScriptedModel(["An answer of a few words."] * (turns + 50)))
        with_memory = Agent(
            ScriptedModel(["An answer of a few words."] * (turns + 50)), middleware=[memory]
        )
        for warm in range(50):  # imports, producer start, first allocations
            config = RunConfig(f"warm-{warm}", f"tenant-{warm % _TENANTS}")
            plain.run("warming up", config)
            with_memory.run("warming up", config)
        ours, raw = [], []
        for i in range(turns):
            config = RunConfig(f"thread-{i}", f"tenant-{i % _TENANTS}")
            question = f"Please remember that my locker number is {i}."
            t0 = time.perf_counter()
            plain.run(question, config)
            t1 = time.perf_counter()
            with_memory.run(question, config)
            t2 = time.perf_counter()
            raw.append(t1 - t0)
            ours.append(t2 - t1)
            progress.tick("turns", i + 1, turns)
        progress.say("waiting for the publisher to drain")
        drained = ns.deployment.flush(60)
    mine, base = Latency.of_seconds(ours), Latency.of_seconds(raw)
    added_p50 = round(mine.p50_ms - base.p50_ms, 4)
    added_p99 = round(mine.p99_ms - base.p99_ms, 4)
    return BenchResult(
        name="hook",
        figures={
            "turns": turns,
            "with_memory": _latency(mine),
            "without": _latency(base),
            "added_p50_ms": added_p50,
            "added_p99_ms": added_p99,
            "p99_ms": mine.p99_ms,
            "raw_p99_ms": base.p99_ms,
            "publisher_drained": drained,
        },
        comparisons=[
            Comparison("turn p50", mine.p50_ms, base.p50_ms, "ms", "agent without memory", False),
            Comparison(
                "turn p99", mine.p99_ms, base.p99_ms, "ms", "agent without memory", False, TARGET
            ),
        ],
        notes=[
            f"after_agent adds {added_p50} ms at p50 and {added_p99} ms at p99 (target: ≤ 1 ms)",
            "in-process journal; a RedisJournal adds its round trips",
        ],
        seconds=time.monotonic() - started,
    )


def _latency(latency: Latency) -> dict[str, float]:
    return {"p50_ms": latency.p50_ms, "p99_ms": latency.p99_ms, "mean_ms": latency.mean_ms}
