"""`bench scale`'s moving parts: a reshard 1 → 2 under a stream of turns, and agent turns
while the leader of their partitions is SIGKILLed, on the bench's own cluster.

- reshard: a worker projects a stream of turns; an observer (a second projection of the same
  namespace, as an agent process has) recalls the tenants that move, again and again, and
  notes which shard its router sent each recall to. Measured: the reshard's duration and
  warm-up, the window after the switch in which a moved tenant's recall still went to its
  old shard (bounded by the layout's window, `layout_window_s`), recall errors, and at the end each
  tenant's memories against its turns (lost, doubled).
- broker kill: agent threads run turns with the memory middleware; after each turn the same
  event is enqueued on a raw librdkafka producer (the baseline). The leader of the busiest
  partitions is SIGKILLed, restarted with `memstream up`, and the phases before the kill,
  from the kill until the broker is back in every partition's in-sync replicas, and after,
  each give the hook's p99 and the raw enqueue's p99. The log then holds exactly one
  record per turn.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Producer

from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import MemstreamError
from memstream.memory.embeddings import Embedder
from memstream.memory.events import MemoryEvent, TurnCompleted
from memstream.memory.tenancy import TenantId, validate_tenant
from memstream.operations import reshard
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import end_offsets, partition_leaders
from memstream.streams.wire import event_record, producer_config
from memstream_bench.cluster import OwnCluster
from memstream_bench.corpus import turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.load import timed_memory
from memstream_bench.stats import Latency, Progress

__all__ = ["measure_broker_kill", "measure_reshard", "wait_applied"]

_TENANTS = 12
_ANSWER = "Noted."


def wait_applied(
    deployment: Deployment, events: Sequence[MemoryEvent], timeout_s: float, progress: Progress
) -> None:
    """Wait until every event is applied on its tenant's shard."""
    status = deployment.status()
    deadline = time.monotonic() + timeout_s
    while pending := status.unapplied(events):
        progress.tick("events applied", len(events) - len(pending), len(events))
        if time.monotonic() > deadline:
            raise MemstreamError(f"{len(pending)} events were not applied within {timeout_s}s")
        time.sleep(0.1)


# -- the reshard -------------------------------------------------------------------------------


def measure_reshard(
    settings: Settings,
    urls: Sequence[str],
    embedder: Embedder,
    progress: Progress,
    *,
    rate: float,
    timeout_s: float,
) -> dict[str, Any]:
    with BenchNamespace(settings, "reshard", embedder) as ns:
        ns.start_worker(turns(1, embedder.model_id, tenants=1)[0])
        deployment = ns.deployment
        # Not `tenant-N`: the worker's probe is tenant-0's, and it would count as a double.
        tenants = [validate_tenant(f"reshard-{i}") for i in range(_TENANTS)]
        moving = [t for t in tenants if deployment.partition_of(t) % len(urls) != 0]
        sent: list[MemoryEvent] = []
        stop = threading.Event()
        streamed = threading.Thread(target=_stream, args=(ns, rate, sent, stop))
        observer = Deployment(ns.settings, embedder=embedder)
        routes: list[tuple[float, int]] = []
        errors: Counter[str] = Counter()
        watched = threading.Thread(target=_observe, args=(observer, moving, routes, errors, stop))
        switched: list[float] = []

        def say(line: str) -> None:
            if "stored" in line:  # the switch: the new layout is on shard 0
                switched.append(time.monotonic())
            progress.say(line)

        streamed.start()
        watched.start()
        try:
            stop.wait(2.0)  # turns and recalls already flowing when the move starts
            done = reshard(deployment, list(urls), say=say, timeout_s=timeout_s)
            stop.wait(2.0)  # and after it
        finally:
            stop.set()
            streamed.join()
            watched.join()
            observer.close()
        wait_applied(deployment, sent, timeout_s, progress)
        stored = deployment.status()
        expected = Counter(e.tenant for e in sent)
        counts = {t: stored.memory_count(validate_tenant(t)) for t in expected}
        lost = sum(max(0, 2 * n - counts[t]) for t, n in expected.items())
        doubled = sum(max(0, counts[t] - 2 * n) for t, n in expected.items())
    at = switched[0] if switched else time.monotonic()
    old = [t for t, shard in routes if t >= at and shard == 0]
    return {
        "from_shards": 1,
        "to_shards": len(urls),
        "moved_partitions": len(done.moved),
        "turns": len(sent),
        "elapsed_s": round(done.elapsed_s, 2),
        "warm_s": round(done.warm_s, 2),
        "caught_up_s": round(done.caught_up_s, 2),
        "old_shard_window_s": round(max(old) - at, 3) if old else 0.0,
        "window_bound_s": done.window_s,
        "recalls": len(routes),
        "recall_errors": sum(errors.values()),
        "lost": lost,
        "doubled": doubled,
    }


def _stream(
    ns: BenchNamespace, rate: float, sent: list[MemoryEvent], stop: threading.Event
) -> None:
    """Turns of `_TENANTS` tenants at `rate` per second until `stop`."""

    async def send() -> None:
        async with ns.deployment.event_publisher() as publisher:
            n = 0
            while not stop.is_set():
                event = TurnCompleted(
                    tenant=f"reshard-{n % _TENANTS}",
                    thread="reshard",
                    run="reshard",
                    turn=n,
                    query=f"Remember that turn {n} came during the reshard.",
                    answer=_ANSWER,
                    recorded_at=datetime.now(UTC),
                    importance=0.5,
                    embedding_model=ns.deployment.embedding_model,
                )
                await publisher.publish([event])
                sent.append(event)
                n += 1
                await asyncio.sleep(1 / rate)  # a pace, not a synchronisation

    asyncio.run(send())


def _observe(
    observer: Deployment,
    tenants: Sequence[TenantId],
    routes: list[tuple[float, int]],
    errors: Counter[str],
    stop: threading.Event,
) -> None:
    """Recall the moving tenants until `stop`, noting where each recall was routed."""
    recaller = observer.recaller()
    n = 0
    while not stop.is_set():
        tenant = tenants[n % len(tenants)]
        routes.append((time.monotonic(), observer.projection.shard_of(tenant)))
        try:
            recaller.recall(tenant, "what came during the reshard?")
        except MemstreamError as exc:
            errors[type(exc).__name__] += 1
        n += 1


# -- the broker kill -------------------------------------------------------------------------


def measure_broker_kill(
    cluster: OwnCluster,
    settings: Settings,
    embedder: Embedder,
    progress: Progress,
    *,
    phase_s: float,
    timeout_s: float,
) -> dict[str, Any]:
    with BenchNamespace(settings, "kill", embedder) as ns:
        scratch = ns.deployment.with_namespace(ns.scratch("enqueue"))
        asyncio.run(scratch.ensure_topics())
        ns.deployment.stores()  # made once, before the agent threads ask for it
        raw = Producer(producer_config(ns.kafka, "librdkafka", {"linger.ms": 2, "log_level": 0}))
        tenants = [f"kill-{i}" for i in range(_TENANTS)]
        samples: list[tuple[float, float, float]] = []  # (ended at, hook s, raw enqueue s)
        lock = threading.Lock()
        stop = threading.Event()

        def agent(n: int) -> None:
            memory, timer = timed_memory(ns)
            bot = Agent(ScriptedModel([_ANSWER] * 100_000), middleware=[memory])
            i = 0
            while not stop.is_set():
                tenant = tenants[(n + 2 * i) % _TENANTS]
                question = f"Agent {n} says {i}."
                timer.spent = 0.0
                result = bot.run(question, RunConfig(f"{n}-{i}", tenant))
                same = event_record(
                    scratch.topics,
                    TurnCompleted(
                        tenant=tenant,
                        thread=f"{n}-{i}",
                        run=result.run_id,
                        turn=0,
                        query=question,
                        answer=_ANSWER,
                        recorded_at=datetime.now(UTC),
                        importance=0.5,
                        embedding_model=embedder.model_id,
                    ),
                )
                t0 = time.perf_counter()
                raw.produce(same.topic, same.value, same.key)
                enqueue = time.perf_counter() - t0
                raw.poll(0)
                with lock:
                    samples.append((time.monotonic(), timer.spent, enqueue))
                i += 1
                stop.wait(0.02)  # an agent's pace, not a synchronisation

        busy = {ns.deployment.partition_of(t) for t in tenants}
        leaders = _leaders(ns.kafka, ns.topics.memory)
        victim = Counter(leaders[p][0] for p in busy).most_common(1)[0][0]
        led = {p for p in busy if leaders[p][0] == victim}
        pid = cluster.pids()[f"kafka-{victim}"]
        agents = [threading.Thread(target=agent, args=(n,)) for n in range(2)]
        for thread in agents:
            thread.start()
        try:
            stop.wait(phase_s)
            progress.say(f"killing broker {victim}, leader of partitions {sorted(led)}")
            os.kill(pid, signal.SIGKILL)  # a crash, not a clean stop
            killed = time.monotonic()

            def moved() -> bool:
                now = _leaders(ns.kafka, ns.topics.memory)
                return bool(now) and all(now[p][0] not in (victim, -1) for p in led)

            _until(moved, timeout_s, "new leaders")
            failover = time.monotonic()
            progress.say(f"new leaders after {failover - killed:.1f}s; restarting the broker")
            cluster.up()
            _until(
                lambda: (
                    (now := _leaders(ns.kafka, ns.topics.memory)) != {}
                    and all(isr == cluster.brokers for _, isr in now.values())
                ),
                timeout_s,
                "the broker to rejoin every ISR",
            )
            rejoined = time.monotonic()
            progress.say(f"rejoined after {rejoined - killed:.1f}s")
            stop.wait(phase_s)
        finally:
            stop.set()
            for thread in agents:
                thread.join()
        if not ns.deployment.flush(timeout_s) or raw.flush(timeout_s):
            raise MemstreamError("the turns' events were not all acknowledged")
        records = sum(asyncio.run(end_offsets(ns.kafka, ns.topics.memory)).values())
    phases = {
        "before": [s for s in samples if s[0] < killed],
        "during": [s for s in samples if killed <= s[0] < rejoined],
        "after": [s for s in samples if s[0] >= rejoined],
    }
    out: dict[str, Any] = {
        "killed": victim,
        "failover_s": round(failover - killed, 2),
        "rejoined_s": round(rejoined - killed, 2),
        "turns": len(samples),
        "records": records,
    }
    for name, phase in phases.items():
        hook = Latency.of_seconds([s[1] for s in phase])
        enqueue = Latency.of_seconds([s[2] for s in phase])
        out[name] = {
            "turns": len(phase),
            "hook_p50_ms": hook.p50_ms,
            "hook_p99_ms": hook.p99_ms,
            "hook_max_ms": round(max(s[1] for s in phase) * 1000, 3),
            "raw_enqueue_p50_ms": enqueue.p50_ms,
            "raw_enqueue_p99_ms": enqueue.p99_ms,
        }
    return out


def _until(condition: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise MemstreamError(f"waited {timeout_s:.0f}s for {what}")
        time.sleep(0.2)


def _leaders(kafka: KafkaConnection, topic: str) -> dict[int, tuple[int, int]]:
    return asyncio.run(partition_leaders(kafka, topic))
