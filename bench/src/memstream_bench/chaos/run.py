"""`memstream bench chaos`: faults at random under a steady load, on a cluster of its own, and
a checker of everything acknowledged (issue 41, docs/reliability.md).

The run: a cluster of 3 brokers (RF=3, min.insync.replicas=2) and 3 Redis shards, two workers
and two servers; a calm spell under load (the baseline), then the seeded plan's faults
(`chaos.plan`) while the load goes on and one tenant is erased midway, then calm again. Then
it converges (every process back, the hook's buffer delivered, every shard's projection at
the log's end) and checks each tenant's memory against the workload's history
(`chaos.history`); `memstream verify` must pass; `memstream replay` rebuilds the projection
from the log and the same check runs on the rebuild.

Figures: operations offered and achieved, each kind's availability and p99 before the faults
and while one is in force, the time to converge after the last fault, faults by kind, writes
checked. Any defect fails the run (exit status 1), its seed printed to replay it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import MemstreamError
from memstream.memory.embeddings import Embedder
from memstream.memory.tenancy import validate_tenant
from memstream.operations import erase_tenant, shard_states
from memstream.processes import quiet_port
from memstream.server.parts import api_keys
from memstream.streams.topics import partition_leaders
from memstream_bench.chaos.faults import Injector
from memstream_bench.chaos.history import History, Kind, Outcome, check
from memstream_bench.chaos.junk import JunkFeeder
from memstream_bench.chaos.negative import NEGATIVE_TENANT, NegativeClients
from memstream_bench.chaos.plan import Component, Plan, plan
from memstream_bench.chaos.processes import (
    Child,
    ClusterService,
    Target,
    send,
    server_command,
    worker_command,
)
from memstream_bench.chaos.workload import Rates, Tenant, Workload
from memstream_bench.cluster import OwnCluster
from memstream_bench.corpus import turns
from memstream_bench.http_load import healthy
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Latency, Progress

__all__ = ["ChaosSizes", "run_chaos"]

_CONVERGE_S = 600.0
_JUNK_EVERY_S = 10.0
_BROKERS, _SHARDS, _WORKERS, _SERVERS = 3, 3, 2, 2


@dataclasses.dataclass(frozen=True, slots=True)
class ChaosSizes:
    seed: int
    minutes: float
    tenants: int = 8
    rates: Rates = dataclasses.field(default_factory=Rates)

    @property
    def calm_s(self) -> float:
        """The calm spells before and after the faults."""
        return max(15.0, self.minutes * 60 * 0.15)

    @property
    def erasures(self) -> int:
        """Tenants erased while the faults go on, evenly spread: one every five minutes, and
        never more than half of them."""
        return max(1, min(round(self.minutes / 5), self.tenants // 2))

    @property
    def fault_s(self) -> float:
        return max(self.minutes * 60 - 2 * self.calm_s, 10.0)


def run_chaos(settings: Settings, embedder: Embedder, sizes: ChaosSizes) -> BenchResult:
    progress = Progress("chaos")
    faults = plan(sizes.seed, sizes.fault_s, calm_before_s=sizes.calm_s)
    for line in faults.describe():
        progress.say(line)
    own = dataclasses.replace(
        settings,
        namespace=f"chaos-{sizes.seed}-{uuid.uuid4().hex[:6]}",
        partitions=6,
        max_memories_per_tenant=0,  # unbounded: every memory stays to be counted
        worker_session_timeout_s=6.0,
    )
    started = time.monotonic()
    logs = Path(tempfile.mkdtemp(prefix=f"memstream-chaos-{sizes.seed}-"))
    with OwnCluster(own, brokers=_BROKERS, shards=_SHARDS) as cluster:
        progress.say(f"cluster up; processes' logs in {logs}")
        with Deployment(cluster.settings, embedder=embedder) as deployment:
            result = _ChaosRun(cluster, deployment, faults, sizes, logs, progress).run()
    if result.failures:
        progress.say(f"logs kept in {logs}; run it again: --seed {sizes.seed}")
    else:
        shutil.rmtree(logs, ignore_errors=True)
    return dataclasses.replace(result, seconds=time.monotonic() - started)


class _ChaosRun:
    """One run's parts, wired once; `run` goes through its phases."""

    def __init__(
        self,
        cluster: OwnCluster,
        deployment: Deployment,
        faults: Plan,
        sizes: ChaosSizes,
        logs: Path,
        progress: Progress,
    ) -> None:
        self._deployment, self._faults, self._sizes = deployment, faults, sizes
        self._logs, self._progress = logs, progress
        self._env = {**cluster.env, **deployment.settings.environ()}
        asyncio.run(deployment.ensure_topics())
        keys = api_keys(deployment)
        self._tenants = [
            Tenant(id=f"chaos-t{i:03d}", label=f"t{i:03d}", key=keys.create(f"chaos-t{i:03d}")[0])
            for i in range(sizes.tenants)
        ]
        self._workers = [
            Child(f"worker-{i}", worker_command(), self._env, logs / f"worker-{i}.log", _up)
            for i in range(_WORKERS)
        ]
        self._urls = [f"http://127.0.0.1:{quiet_port()}" for _ in range(_SERVERS)]
        self._servers = [
            Child(
                f"server-{i}",
                server_command(int(url.rsplit(":", 1)[1])),
                self._env,
                logs / f"server-{i}.log",
                _healthy(url),
            )
            for i, url in enumerate(self._urls)
        ]
        pids = cluster.pids()
        self._targets: dict[Component, Sequence[Target]] = {
            Component.BROKER: [
                ClusterService(cluster, n, self._in_sync) for n in sorted(pids) if "kafka" in n
            ],
            Component.SHARD: [ClusterService(cluster, n) for n in sorted(pids) if "redis" in n],
            Component.WORKER: self._workers,
            Component.SERVER: self._servers,
        }
        self._history = History()
        self._workload = Workload(
            deployment, self._tenants, self._urls, self._history, sizes.rates, sizes.seed
        )
        self._injector = Injector(faults, self._targets, progress.say)
        self._junk = JunkFeeder(deployment, every_s=_JUNK_EVERY_S)
        fuzz_key = keys.create(NEGATIVE_TENANT)[0]
        self._negative = NegativeClients(self._urls, fuzz_key, sizes.seed, logs)

    def run(self) -> BenchResult:
        try:
            for child in [*self._workers, *self._servers]:
                child.start()
            _projecting(self._deployment)
            self._progress.say("workers project, servers answer: load on")
            load = self._load()
            self._progress.say("load off; converging")
            defects = [f"{t.name} was down when the load ended" for t in self._all() if not t.pid()]
            defects += self._injector.errors
            for target in self._all():
                target.start()
            converged_s = _converge(self._deployment, self._injector.last_recovery or load.ended)
            self._progress.say(f"converged {converged_s:.1f}s after the last fault; checking")
            defects += self._check()
        finally:
            self._workload.stop()
            self._negative.stop()
            self._junk.stop(timeout_s=10.0)
            for target in self._all():
                send(target, signal.SIGCONT)  # nothing is left paused, whatever ended the run
            for child in [*self._workers, *self._servers]:
                child.stop()
        return self._report(load, converged_s, defects)

    def _all(self) -> list[Target]:
        return [t for group in self._targets.values() for t in group]

    def _in_sync(self) -> bool:
        kafka, topic = self._deployment.kafka, self._deployment.topics.memory
        leaders = asyncio.run(partition_leaders(kafka, topic))
        return bool(leaders) and all(isr == _BROKERS for _, isr in leaders.values())

    def _load(self) -> _Load:
        """The load for the run's minutes at least: the plan's faults after the calm, the
        erasures among them, and the calm after; every client stopped and its outcomes in the
        history."""
        sizes = self._sizes
        started = time.monotonic()
        self._workload.start()
        self._junk.start()
        self._negative.start()
        self._injector.start()
        erasers = [
            threading.Timer(
                sizes.calm_s + sizes.fault_s * (n + 1) / (sizes.erasures + 1),
                self._workload.erase,
                args=(tenant, functools.partial(erase_tenant, self._deployment, tenant.id), 300.0),
            )
            for n, tenant in enumerate(reversed(self._tenants[-sizes.erasures :]))
        ]
        for eraser in erasers:
            eraser.daemon = True  # an interrupted run does not wait on them
            eraser.start()
        self._injector.join()
        faults_over = time.monotonic()
        for eraser in erasers:
            eraser.join()
        # The calm after the faults, and the load lasts its minutes where they ended early.
        until = max(faults_over + sizes.calm_s, started + sizes.minutes * 60)
        time.sleep(max(0.0, until - time.monotonic()))
        self._workload.stop()
        for found in self._negative.stop():
            self._history.saw(found)
        self._junk.stop(timeout_s=60.0)
        return _Load(started, faults_over, time.monotonic())

    def _check(self) -> list[str]:
        """The history against the converged memory, `verify`, then the same after `replay`."""
        labels = {t.id: t.label for t in self._tenants}
        defects = check(self._history, self._memories(), labels)
        defects += self._sessions()
        defects += self._junk.check(t.id for t in self._tenants)
        defects += self._command("verify", "--timeout", "300", "--allow-dead-letters")
        defects += self._command("replay", "--allow-dead-letters")
        replayed = check(self._history, self._memories(), labels)
        return defects + [f"after replay: {d}" for d in replayed if d not in defects]

    def _memories(self) -> dict[str, list[str]]:
        reader = self._deployment.reader()
        return {
            t.id: [m.content for m in reader.memories(validate_tenant(t.id))] for t in self._tenants
        }

    def _sessions(self) -> list[str]:
        """Each acknowledged working-memory session holds its messages."""
        keys = {t.id: t.key for t in self._tenants}
        defects = []
        for session, (tenant, texts) in sorted(self._history.sessions.items()):
            if tenant in self._history.erased:
                continue
            answer = httpx.get(
                f"{self._urls[0]}/v1/working-memory/{session}",
                headers={"Authorization": f"Bearer {keys[tenant]}"},
                timeout=30,
            )
            held = []
            if answer.status_code == 200:
                held = [m["content"] for m in answer.json().get("messages", [])]
            if list(texts) != held[-len(texts) :]:
                defects.append(f"session {session} of {tenant} holds {held!r}, not {list(texts)!r}")
        return defects

    def _command(self, *args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "memstream", *args],
            env=self._env,
            capture_output=True,
            text=True,
            check=False,
        )
        (self._logs / f"{args[0]}.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            said = (done.stdout + done.stderr)[-1500:]
            return [f"memstream {' '.join(args)} failed ({done.returncode}): {said}"]
        return []

    def _report(self, load: _Load, converged_s: float, defects: list[str]) -> BenchResult:
        history, injector, sizes = self._history, self._injector, self._sizes
        calm_until = load.started + self._faults.calm_before_s
        phases: dict[str, dict[str, list[Outcome]]] = {}
        faults: dict[str, dict[str, list[Outcome]]] = {}
        for outcome in history.outcomes:
            kinds = injector.kinds_over(outcome.at, outcome.at + outcome.seconds)
            phase = "during" if kinds else "between"
            phase = "before" if outcome.at < calm_until else phase
            phases.setdefault(outcome.op, {}).setdefault(phase, []).append(outcome)
            for kind in kinds:
                faults.setdefault(kind, {}).setdefault(outcome.op, []).append(outcome)
        operations = _phases(phases)
        achieved = Counter(o.op for o in history.outcomes if o.ok)
        figures: dict[str, Any] = {
            "seed": sizes.seed,
            "minutes": sizes.minutes,
            "plan": self._faults.describe(),
            "faults": dict(Counter(w.kind for w in injector.windows)),
            "faults_skipped": dict(injector.skipped),
            "load_s": round(load.seconds, 1),
            "offered_per_s": {
                k: round(v / load.seconds, 2) for k, v in self._workload.offered.items()
            },
            "achieved_per_s": {k: round(v / load.seconds, 2) for k, v in sorted(achieved.items())},
            "operations": operations,
            # Each operation while a fault of each kind was in force (an overlap counts twice).
            "operations_by_fault": _phases(faults),
            "failed_by_reason": {
                f"{op}: {why}": n for (op, why), n in sorted(history.failures.items())
            },
            "converged_s": round(converged_s, 1),
            "writes_checked": {k.value: history.acked(k) for k in Kind},
            "forgets_acked": sum(1 for _, ok in history.forgets.values() if ok),
            "tenants_erased": len(history.erased),
            "junk": {"delivered": dict(self._junk.delivered), "refused": dict(self._junk.refused)},
            "negative_cases_sent": self._negative.sent,
            "defects": defects,
        }
        command = f"memstream bench chaos --seed {sizes.seed} --minutes {sizes.minutes}"
        notes = [f"seed {sizes.seed}: `{command}`"]
        notes += [f"defect: {d}" for d in defects] or ["nothing lost, doubled, leaked or back"]
        return BenchResult(
            "chaos", figures, _comparisons(operations), notes, failures=tuple(defects)
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _Load:
    started: float  # monotonic
    faults_over: float
    ended: float

    @property
    def seconds(self) -> float:
        return self.ended - self.started


def _up() -> bool:
    return True  # a worker: it shows it projects by the probe (`_projecting`)


def _healthy(url: str) -> Callable[[], bool]:
    return lambda: healthy(url)


def _projecting(deployment: Deployment) -> None:
    probe = turns(1, deployment.embedding_model, tenants=1)[0]
    probe = dataclasses.replace(probe, tenant="chaos-probe")

    async def publish() -> None:
        async with deployment.event_publisher() as publisher:
            await publisher.publish([probe])

    asyncio.run(publish())
    if deployment.status().wait_applied([probe], 300.0):
        raise MemstreamError("the chaos run's workers did not project a probe within 300s")


def _converge(deployment: Deployment, since: float) -> float:
    """Seconds from `since` until the hook's buffer is delivered and every shard's live
    projection has applied the log to its end."""
    if not deployment.flush(_CONVERGE_S):
        raise MemstreamError(f"the hook's buffered turns did not reach Kafka in {_CONVERGE_S}s")
    deadline = time.monotonic() + _CONVERGE_S
    while True:
        try:
            states = shard_states(deployment)
        except MemstreamError:
            states = []
        if states and all(s.lag == 0 for s in states):
            return time.monotonic() - since
        if time.monotonic() > deadline:
            raise MemstreamError(
                f"the projection did not converge within {_CONVERGE_S}s: "
                + ", ".join(f"shard {s.report.shard} lag {s.lag}" for s in states)
            )
        time.sleep(0.5)


def _comparisons(operations: dict[str, dict[str, dict[str, float]]]) -> list[Comparison]:
    """Availability and p99 while a fault is in force beside the calm before any."""
    comparisons = []
    baseline = "the same operations in the calm before any fault"
    for op in ("recall", "search", "memory", "turn"):
        before, during = operations.get(op, {}).get("before"), operations.get(op, {}).get("during")
        if not before or not during:
            continue
        comparisons.append(
            Comparison(
                f"{op} availability during faults",
                during["availability"],
                before["availability"],
                "share",
                baseline,
                higher_is_better=True,
            )
        )
        if "p99_ms" in before and "p99_ms" in during:
            comparisons.append(
                Comparison(
                    f"{op} p99 during faults",
                    during["p99_ms"],
                    before["p99_ms"],
                    "ms",
                    baseline,
                    higher_is_better=False,
                )
            )
    return comparisons


def _phases(grouped: dict[str, dict[str, list[Outcome]]]) -> dict[str, dict[str, Any]]:
    return {
        name: {part: _phase(outcomes) for part, outcomes in sorted(parts.items())}
        for name, parts in sorted(grouped.items())
    }


def _phase(outcomes: Sequence[Outcome]) -> dict[str, float]:
    ok = [o.seconds for o in outcomes if o.ok]
    figures: dict[str, float] = {
        "count": len(outcomes),
        "availability": round(len(ok) / len(outcomes), 4) if outcomes else 0.0,
    }
    if ok:
        latency = Latency.of_seconds(ok)
        figures |= {"p50_ms": latency.p50_ms, "p99_ms": latency.p99_ms}
    return figures
