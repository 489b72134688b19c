"""`bench load`: many agent threads recording through the memory middleware at once, against
the real stack and one worker; then an audit that nothing was lost or doubled.

How: a worker projects a fresh namespace. N threads each run an agent on a scripted model
(no LLM) with the memory middleware recording every turn (`TurnCompleted`, sent in the
background by the agent side's publisher), each turn a new thread of one of the tenants, for
a bounded time and a bounded number of turns. Each thread interleaves a turn of the same agent
without memory, so the raw baseline (the turn without the hook) is measured under the very
same load. A sampler reads the worker's lag (log end offsets - the projection's positions)
twice a second, and goes on after the threads stop until the worker has caught up.

Figures: turns/s accepted (turns with memory that completed, per second of wall clock), the
turn's p50/p99 with and without memory, the hook's own time in each turn (both hooks, timed by
the middleware's HookTimer) beside a raw producer's enqueue of the same event under the same
threads (librdkafka `produce` of the encoded event, same producer settings, to a scratch
topic: what handing an event to a background producer costs with nothing else; the target is
the hook's p99 within 2x of it), the lag over time (plotted in the report) and the time to
catch up. The audit reads the whole memory topic back: every event in the log must be applied
exactly once (its marker), and each tenant must hold exactly two memories (query, answer) per
turn event: `lost` and `doubled` must both be 0.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer
from confluent_kafka import Producer

from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.config import Settings
from memstream.hooks import RecordConfig, SemanticMemoryMiddleware
from memstream.memory.codec import DecodeContext, decode_event
from memstream.memory.embeddings import Embedder
from memstream.memory.events import TurnCompleted
from memstream.memory.manager import HeuristicImportance
from memstream.projections.connection import text
from memstream.streams.topics import end_offsets
from memstream.streams.wire import event_record, producer_config
from memstream_bench.corpus import turns as corpus_turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Latency, Progress

__all__ = ["HookTime", "run_load"]

TARGET = "0 lost, 0 doubled"
HOOK_TARGET = "hook p99 ≤ 2x a raw enqueue's p99"
_TENANTS = 100
_SAMPLE_S = 0.5
_ANSWER = "Noted: I will keep that in mind for next time."


class HookTime:
    """The middleware's HookTimer: what its hooks spent in the current turn."""

    def __init__(self) -> None:
        self.spent = 0.0

    def observe_hook(self, hook: str, seconds: float) -> None:
        self.spent += seconds


def timed_memory(ns: BenchNamespace) -> tuple[SemanticMemoryMiddleware, HookTime]:
    """A record-only memory middleware on the bench's deployment, as an agent thread's, and
    the timer of its hooks."""
    timer = HookTime()
    memory = SemanticMemoryMiddleware(
        stores=ns.deployment.stores(),
        client=ScriptedModel([]),
        record=RecordConfig(),
        timer=timer,
        recorder=ns.deployment.recorder(),
    )
    return memory, timer


def _lag(ns: BenchNamespace) -> int:
    topic = ns.topics.memory
    ends = asyncio.run(end_offsets(ns.kafka, topic))
    positions = ns.status.positions()
    return sum(max(end - positions.get(f"{topic}/{p}", -1) - 1, 0) for p, end in ends.items())


def _log_events(ns: BenchNamespace) -> list[TurnCompleted]:
    """Every turn event in the memory topic, read back from the start."""

    async def read() -> list[TurnCompleted]:
        ends = await end_offsets(ns.kafka, ns.topics.memory)
        expected = sum(ends.values())
        consumer = AIOKafkaConsumer(
            ns.topics.memory,
            **ns.kafka.aiokafka(),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        events, read_count = [], 0
        context = DecodeContext(keyring=ns.deployment.keyring())
        try:
            while read_count < expected:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    read_count += len(records)
                    for record in records:
                        event = decode_event(record.value or b"", context)
                        if isinstance(event, TurnCompleted):
                            events.append(event)
        finally:
            await consumer.stop()
        return events

    return asyncio.run(read())


def run_load(
    settings: Settings,
    embedder: Embedder,
    *,
    threads: int = 8,
    seconds: float = 20.0,
    turns: int = 300,
    catch_up_s: float = 300.0,
) -> BenchResult:
    started = time.monotonic()
    progress = Progress("load")
    with BenchNamespace(settings, "load", embedder) as ns:
        probe = corpus_turns(1, embedder.model_id, tenants=1)[0]
        progress.say("starting a worker")
        ns.start_worker(probe)
        ns.deployment.stores()  # made once, before the agent threads ask for it
        scratch = ns.deployment.with_namespace(ns.scratch("enqueue"))
        asyncio.run(scratch.ensure_topics())
        raw_producer = Producer(producer_config(ns.kafka, "librdkafka", {"linger.ms": 2}))
        ours: list[float] = []
        raw: list[float] = []
        hooks: list[float] = []
        enqueues: list[float] = []
        lock = threading.Lock()
        done = Counter[str]()
        importance = HeuristicImportance()

        def agent_thread(n: int, deadline: float) -> None:
            memory, timer = timed_memory(ns)
            plain = Agent(ScriptedModel([_ANSWER] * (turns + 1)))
            with_memory = Agent(ScriptedModel([_ANSWER] * (turns + 1)), middleware=[memory])
            mine, base, spent, enqueued, statuses = [], [], [], [], Counter[str]()
            for i in range(turns):
                if time.monotonic() > deadline:
                    break
                config = RunConfig(f"load-{n}-{i}", f"tenant-{(n * turns + i) % _TENANTS}")
                question = f"Please remember that thread {n} said {i}."
                t0 = time.perf_counter()
                plain.run(question, config)
                t1 = time.perf_counter()
                timer.spent = 0.0
                result = with_memory.run(question, config)
                t2 = time.perf_counter()
                # The raw baseline: the same turn's event, encoded beforehand, enqueued.
                same = event_record(
                    scratch.topics,
                    TurnCompleted(
                        tenant=config.tenant_id or "",
                        thread=config.thread_id,
                        run=result.run_id,
                        turn=0,
                        query=question,
                        answer=_ANSWER,
                        recorded_at=datetime.now(UTC),
                        importance=importance.score(question, _ANSWER),
                        embedding_model=embedder.model_id,
                    ),
                )
                t3 = time.perf_counter()
                raw_producer.produce(same.topic, same.value, same.key)
                t4 = time.perf_counter()
                base.append(t1 - t0)
                mine.append(t2 - t1)
                spent.append(timer.spent)
                enqueued.append(t4 - t3)
                statuses[result.status] += 1
            with lock:
                ours.extend(mine)
                raw.extend(base)
                hooks.extend(spent)
                enqueues.extend(enqueued)
                done.update(statuses)

        lag_series: list[tuple[float, int]] = []
        sampling = threading.Event()

        def sampler(t0: float) -> None:
            while not sampling.is_set():
                lag_series.append((round(time.monotonic() - t0, 2), _lag(ns)))
                sampling.wait(_SAMPLE_S)

        progress.say(f"{threads} agent threads for up to {seconds:.0f}s / {turns} turns each")
        t0 = time.monotonic()
        watcher = threading.Thread(target=sampler, args=(t0,), daemon=True)
        watcher.start()
        workers = [
            threading.Thread(target=agent_thread, args=(n, t0 + seconds)) for n in range(threads)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        load_s = time.monotonic() - t0
        drained = ns.deployment.flush(60)
        raw_producer.flush(60)
        progress.say("waiting for the worker to catch up")
        deadline = time.monotonic() + catch_up_s
        while _lag(ns) > 0 and time.monotonic() < deadline:
            time.sleep(_SAMPLE_S)
        caught_up_s = time.monotonic() - t0
        sampling.set()
        watcher.join()
        lag_series.append((round(time.monotonic() - t0, 2), _lag(ns)))

        progress.say("auditing: the log against the projection")
        logged = _log_events(ns)
        keys = ns.status.live()
        tenants = {e.tenant for e in logged}
        applied = 0
        for tenant in tenants:
            markers = {text(k) for k in ns.redis.hkeys(keys.applied(tenant))}
            applied += len({e.id for e in logged if e.tenant == tenant} & markers)
        stored = sum(
            sum(1 for _ in ns.redis.scan_iter(match=f"{keys.tenant_memory_prefix(t)}*", count=1000))
            for t in tenants
        )
        distinct = {e.id for e in logged}
        lost = len(distinct) - applied
        doubled = stored - 2 * applied  # each turn event is two memories: query, answer

    accepted = done["completed"]
    mine, base = Latency.of_seconds(ours), Latency.of_seconds(raw)
    hook, enqueue = Latency.of_seconds(hooks), Latency.of_seconds(enqueues)
    figures = {
        "threads": threads,
        "tenants": _TENANTS,
        "load_s": round(load_s, 1),
        "turns_completed": accepted,
        "turns_per_s": round(accepted / load_s, 1),
        "turn_with_memory": {"p50_ms": mine.p50_ms, "p99_ms": mine.p99_ms},
        "turn_without": {"p50_ms": base.p50_ms, "p99_ms": base.p99_ms},
        "hook_added_p99_ms": round(mine.p99_ms - base.p99_ms, 4),
        "hook": {"p50_ms": hook.p50_ms, "p99_ms": hook.p99_ms},
        "raw_enqueue": {"p50_ms": enqueue.p50_ms, "p99_ms": enqueue.p99_ms},
        "hook_p99_over_raw_enqueue_p99": round(hook.p99_ms / enqueue.p99_ms, 2),
        "publisher_drained": drained,
        "events_in_log": len(distinct),
        "lost": lost,
        "doubled": doubled,
        "max_lag": max((lag for _, lag in lag_series), default=0),
        "caught_up_s": round(caught_up_s, 1),
        "lag_series": lag_series,
    }
    return BenchResult(
        name="load",
        figures=figures,
        comparisons=[
            Comparison(
                "hook p99 under load",
                hook.p99_ms,
                enqueue.p99_ms,
                "ms",
                "raw producer enqueue",
                False,
                HOOK_TARGET,
            ),
            Comparison(
                "turn p99 under load", mine.p99_ms, base.p99_ms, "ms", "agent without memory", False
            ),
            Comparison(
                "turn p50 under load", mine.p50_ms, base.p50_ms, "ms", "agent without memory", False
            ),
        ],
        notes=[
            f"{accepted} turns accepted in {load_s:.1f}s ({figures['turns_per_s']} turns/s) by "
            f"{threads} threads; the worker's lag peaked at {figures['max_lag']} events and was "
            f"0 again {caught_up_s:.1f}s after the start",
            f"audit: {len(distinct)} turn events in the log, {lost} lost, {doubled} doubled "
            f"(target: {TARGET})",
        ],
        seconds=time.monotonic() - started,
        series={"worker lag (events)": lag_series},
    )
