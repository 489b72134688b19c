"""`bench encryption`: what sealing content (docs/erasure.md) costs, on against off, same run.

Two namespaces side by side, one with MEMSTREAM_ENCRYPTION on, one off, the same work on each:
- **hook**: the agent with the memory middleware recording every turn, sealed against
  plaintext, interleaved turn by turn (the order alternating) so noise hits both alike: turn
  p50 and p99. Sealing is AES-GCM of three fields in the agent's thread; the tenant's data key
  is looked up (created on the warm-up turns).
- **projection**: the real Projector over a plain consumer (decode — opening the seal —,
  apply once in Redis), vectors precomputed so the embedder does not hide the difference: the
  worker's loop, events/s. With a CPU embedder the worker's own rate is the embedder's, and
  the relative cost of sealing smaller still.
- **replay**: the real Replayer (`memstream replay`, swap included) over each log, vectors
  precomputed likewise, events/s.
Each figure is the best of `rounds` runs, alternating on and off. Target: within 5%.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.hooks import RecordConfig, SemanticMemoryMiddleware
from memstream.memory.embeddings import Embedder
from memstream.memory.events import memories_of
from memstream_bench.corpus import turns as corpus_turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.replay import PrecomputedEmbedder, rebuild_loop, replay_run
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Latency, Progress, ratio

__all__ = ["run_encryption"]

TARGET = "within 5% of encryption off"
_TENANTS = 10


def _agent(ns: BenchNamespace, turns: int) -> Agent:
    memory = SemanticMemoryMiddleware(
        stores=ns.deployment.stores(),
        client=ScriptedModel([]),
        record=RecordConfig(),
        recorder=ns.deployment.recorder(),
    )
    return Agent(ScriptedModel(["An answer of a few words."] * (turns + 50)), middleware=[memory])


def _hook(on: BenchNamespace, off: BenchNamespace, turns: int, progress: Progress) -> list[Latency]:
    agents = [_agent(on, turns), _agent(off, turns)]
    for warm in range(50):  # imports, producers, every tenant's data key
        for agent in agents:
            agent.run("warming up", RunConfig(f"warm-{warm}", f"tenant-{warm % _TENANTS}"))
    durations: list[list[float]] = [[], []]
    for i in range(turns):
        config = RunConfig(f"thread-{i}", f"tenant-{i % _TENANTS}")
        question = f"Please remember that my locker number is {i}."
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            t0 = time.perf_counter()
            agents[side].run(question, config)
            durations[side].append(time.perf_counter() - t0)
        progress.tick("turns", i + 1, turns)
    for ns in (on, off):
        ns.deployment.flush(60)
    return [Latency.of_seconds(d) for d in durations]


def run_encryption(
    settings: Settings,
    embedder: Embedder,
    *,
    turns: int = 2000,
    events: int = 1000,
    rounds: int = 2,
) -> BenchResult:
    started = time.monotonic()
    progress = Progress("encryption")
    sealed = dataclasses.replace(settings, encryption=True)
    plain = dataclasses.replace(settings, encryption=False)
    with (
        BenchNamespace(sealed, "enc-hook-on", embedder) as on,
        BenchNamespace(plain, "enc-hook-off", embedder) as off,
    ):
        progress.say(f"hook: {turns} turns each, interleaved")
        hook_on, hook_off = _hook(on, off, turns, progress)
    with (
        BenchNamespace(sealed, "enc-on", embedder) as on,
        BenchNamespace(plain, "enc-off", embedder) as off,
    ):
        log = corpus_turns(events, embedder.model_id)
        progress.say(f"writing {events} turns to each log (sealed, plaintext)")
        on.publish(log)
        off.publish(log)
        texts = sorted({m.content for e in log for m in memories_of(e)})
        progress.say(f"embedding {len(texts)} texts once (both sides reuse the vectors)")
        vectors = dict(zip(texts, embedder.embed_documents(texts), strict=True))
        cached = PrecomputedEmbedder(embedder.model_id, vectors, embedder.dims)

        loop: dict[str, float] = {"on": 0.0, "off": 0.0}
        replay: dict[str, float] = {"on": 0.0, "off": 0.0}
        for n in range(rounds):
            order = (("on", on), ("off", off))
            for side, ns in order if n % 2 == 0 else order[::-1]:
                keyring = ns.deployment.keyring()
                run = asyncio.run(
                    rebuild_loop(
                        ns.settings,
                        ns.topics.memory,
                        ns.scratch(f"loop{n}"),
                        cached,
                        events,
                        progress,
                        keyring,
                    )
                )
                loop[side] = max(loop[side], run.per_second)
                replayer = Deployment(ns.settings, embedder=cached)
                try:
                    replayed = asyncio.run(replay_run(replayer, reembed=True, progress=progress))
                finally:
                    replayer.close()
                replay[side] = max(replay[side], replayed.per_second)

    figures = {
        "turns": turns,
        "events": events,
        "hook_p50_ms_on": hook_on.p50_ms,
        "hook_p50_ms_off": hook_off.p50_ms,
        "hook_p99_ms_on": hook_on.p99_ms,
        "hook_p99_ms_off": hook_off.p99_ms,
        "hook_p99_ratio": ratio(hook_on.p99_ms, hook_off.p99_ms),
        "projection_events_per_s_on": round(loop["on"], 1),
        "projection_events_per_s_off": round(loop["off"], 1),
        "projection_ratio": ratio(loop["on"], loop["off"]),
        "replay_events_per_s_on": round(replay["on"], 1),
        "replay_events_per_s_off": round(replay["off"], 1),
        "replay_ratio": ratio(replay["on"], replay["off"]),
    }
    off_label = "encryption off, same run"
    return BenchResult(
        name="encryption",
        figures=figures,
        comparisons=[
            Comparison("turn p50, sealed", hook_on.p50_ms, hook_off.p50_ms, "ms", off_label, False),
            Comparison(
                "turn p99, sealed", hook_on.p99_ms, hook_off.p99_ms, "ms", off_label, False, TARGET
            ),
            Comparison(
                "projection (projector loop, vectors precomputed)",
                figures["projection_events_per_s_on"],
                figures["projection_events_per_s_off"],
                "events/s",
                off_label,
                True,
                TARGET,
            ),
            Comparison(
                "replay (swap included, vectors precomputed)",
                figures["replay_events_per_s_on"],
                figures["replay_events_per_s_off"],
                "events/s",
                off_label,
                True,
                TARGET,
            ),
        ],
        notes=[
            f"best of {rounds} alternating rounds for projection and replay; hook turns "
            "interleaved; vectors precomputed, so the embedder (which dominates a real worker) "
            "does not hide the cost of sealing"
        ],
        seconds=time.monotonic() - started,
    )
