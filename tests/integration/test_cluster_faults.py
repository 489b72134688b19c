"""Faults on the replicated local cluster, `memstream up --brokers 3 --shards 3`: three
Kafka brokers (a KRaft quorum of three) and three Redis shards, started once for this module
on free ports, its state in a temporary folder (killing a broker or a shard of the suite's
shared stack would fail whatever runs beside it). Its processes find it as every process on
the machine does, through the topology `up` recorded in the state folder: no test names a
bootstrap server or a Redis. Each test has a namespace of its own, six partitions (two per
shard) and no memory bound, and ends by counting every tenant's memories and markers exactly.

- A broker SIGKILLed mid-stream, the leader of busy partitions: agent turns never wait for
  it, nothing is lost or doubled, and restarted it rejoins every partition's in-sync replicas.
- A Redis shard SIGKILLed mid-stream: the other shards' tenants go on getting new memories
  recalled while it is down, and restarted from its files it heals from the log.
- A worker SIGKILLed (twice) while its batches write to every shard: its successor finishes
  with every event applied once on its tenant's shard.

Marked `cluster` (`make test-cluster` runs them alone). The reshard under load runs on Redis
of its own in test_shards.py: it starts from one shard, and this cluster has three.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from memstream import MessageRecorded, Settings
from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.cli.stack import LocalStack
from memstream.deployment import Deployment
from memstream.errors import RedisUnavailableError
from memstream.hooks import RecordConfig, SemanticMemoryMiddleware
from memstream.memory.events import MemoryEvent
from memstream.memory.tenancy import tenant_key, tenant_token
from memstream.projections.schema import Keyspace
from memstream.streams.topics import cluster_report, partition_leaders
from memstream.streams.wire import partition_of
from memstream.testing.stack import wait_until_recallable

from .clusters import in_sync, local_cluster, projecting
from .helpers import TestStack, start_worker, stop_worker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

BROKERS = 3
SHARDS = 3
PARTITIONS = 6  # two led by each broker and two on each shard: a kill hits some, not all
TENANTS = 12
THREADS = 4
TURN_EVERY_S = 0.1  # each thread's pace: ~40 turns/s in all, what one worker keeps up with
# A turn's hooks hand its event to the background publisher and return; a hook that waited
# for the broker would take the whole failover (asserted to last at least this long).
HOOK_BOUND_S = 1.0
# A JVM's start and a backlog's projection on the busy shared machine.
_SLOW_S = 180.0


@pytest.fixture(scope="module")
def local(
    env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, str], LocalStack]]:
    """Three brokers and three Redis shards of this module's own."""
    with local_cluster(
        env,
        tmp_path_factory.mktemp("cluster") / "stack",
        BROKERS,
        SHARDS,
        MEMSTREAM_PARTITIONS=str(PARTITIONS),
        MEMSTREAM_MAX_MEMORIES="0",  # unbounded: every memory stays to be counted
        MEMSTREAM_WORKER_SESSION_TIMEOUT="6",  # the broker's minimum: a quick takeover
    ) as cluster:
        yield cluster


@pytest.fixture
def cluster(local: tuple[dict[str, str], LocalStack]) -> tuple[dict[str, str], LocalStack]:
    """The module's cluster with every service up (a test before may have killed one, and
    failed before restarting it), and a namespace of the test's own."""
    env, stack = local
    stack.up(brokers=BROKERS, shards=SHARDS, say=lambda _: None)
    return env | {"MEMSTREAM_NAMESPACE": f"cluster-{uuid.uuid4().hex[:8]}"}, stack


class Placed:
    """The cluster's shards as a test reads them: a tenant's keys on its shard, the others'
    keys nowhere else."""

    def __init__(self, deployment: Deployment) -> None:
        self._deployment = deployment
        urls = deployment.settings.shard_urls
        assert len(urls) == SHARDS  # found through the topology
        self.clients = [redis.Redis.from_url(url) for url in urls]
        self._keys = Keyspace(deployment.settings.namespace).at(1)

    def shard(self, tenant: str) -> int:
        return self._deployment.projection.shard_of(tenant)

    def applied(self, tenant: str) -> int:
        """The tenant's apply-once markers, on its shard."""
        return int(self.clients[self.shard(tenant)].hlen(self._keys.applied(tenant)))

    def ordered(self, tenant: str) -> int:
        """The tenant's memories in its order set, on its shard."""
        return int(self.clients[self.shard(tenant)].zcard(self._keys.order(tenant)))

    def memories(self, tenant: str) -> int:
        """The tenant's memories as the reader finds them."""
        return len(self._deployment.reader().memories(tenant))

    def assert_exact(self, tenant: str, events: int, memories: int) -> None:
        """The tenant holds exactly `events` markers and `memories` memories (in its order
        set and as the reader finds them), on its shard and nowhere else."""
        assert self.applied(tenant) == events, tenant  # none lost
        assert self.ordered(tenant) == self.memories(tenant) == memories, tenant  # none doubled
        assert self.strays(tenant) == [], tenant

    def strays(self, tenant: str) -> list[bytes]:
        """Keys of the tenant on shards other than its own (there must be none)."""
        home, token = self.shard(tenant), tenant_token(tenant)
        return [
            key
            for shard, client in enumerate(self.clients)
            if shard != home
            for key in client.scan_iter(match=f"*{token}*")
            if token in key.decode().split(":")  # not a tenant whose id merely starts alike
        ]


@dataclass(frozen=True, slots=True)
class _Hook:
    """What a turn's hooks spent, and when the turn ended."""

    at: float
    seconds: float


class _HookTime:
    """The middleware's HookTimer: what its hooks spent in the current turn."""

    def __init__(self) -> None:
        self.spent = 0.0

    def observe_hook(self, hook: str, seconds: float) -> None:
        self.spent += seconds


def test_the_leader_of_busy_partitions_killed_mid_stream_blocks_no_turn_and_loses_nothing(
    cluster: tuple[dict[str, str], LocalStack], tmp_path: Path
) -> None:
    env, local = cluster
    settings = Settings.from_env(env)
    assert settings.bootstrap_servers.count(",") == BROKERS - 1  # found through the topology
    stack = TestStack(settings)
    deployment = Deployment(settings)
    placed = Placed(deployment)
    log = tmp_path / "worker.log"
    worker = start_worker(env, log)
    try:
        projecting(deployment, worker, log)
        stores = deployment.stores()
        tenants = [f"failover-{n}" for n in range(TENANTS)]
        turns: Counter[str] = Counter()
        statuses: Counter[str] = Counter()
        hooks: list[_Hook] = []
        lock = threading.Lock()
        stop = threading.Event()

        def agent_thread(n: int) -> None:
            timer = _HookTime()
            memory = SemanticMemoryMiddleware(
                stores=stores, client=ScriptedModel([]), record=RecordConfig(), timer=timer
            )
            agent = Agent(ScriptedModel(["Noted."] * 10_000), middleware=[memory])
            i = 0
            while not stop.is_set():
                tenant = tenants[(n + THREADS * i) % TENANTS]
                timer.spent = 0.0
                result = agent.run(f"thread {n} says {i}", RunConfig(f"{n}-{i}", tenant))
                with lock:
                    statuses[result.status] += 1
                    turns[tenant] += 1
                    hooks.append(_Hook(time.monotonic(), timer.spent))
                i += 1
                stop.wait(TURN_EVERY_S)  # the pace of a conversation, not a synchronisation

        def applied() -> int:
            return sum(placed.applied(t) for t in tenants)

        busy = {partition_of(t, PARTITIONS) for t in tenants}
        leaders = asyncio.run(partition_leaders(stack.kafka, stack.topics.memory))
        assert {isr for _, isr in leaders.values()} == {BROKERS}  # min(3, brokers) replicas
        victim = Counter(leaders[p][0] for p in busy).most_common(1)[0][0]
        led = {p for p in busy if leaders[p][0] == victim}
        name = f"kafka-{victim}"
        pid = local.pid(name)
        assert pid is not None

        threads = [threading.Thread(target=agent_thread, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        try:
            wait_until(lambda: applied() >= 40, "the first turns to be projected")
            os.kill(pid, signal.SIGKILL)  # a crash, not a clean shutdown
            killed_at = time.monotonic()
            wait_until(lambda: local.pid(name) is None, "the broker to be gone")

            def moved() -> bool:
                now = asyncio.run(partition_leaders(stack.kafka, stack.topics.memory))
                return bool(now) and all(now[p][0] not in (victim, -1) for p in led)

            wait_until(moved, "the killed broker's partitions to get new leaders")
            moved_at = time.monotonic()
            # What the console's operations page shows: the broker down, no partition
            # offline, every one short of a replica.
            seen = asyncio.run(cluster_report(stack.kafka, stack.topics.memory))
            assert [b.node for b in seen.brokers if not b.up] == [victim], seen
            assert seen.offline == () and seen.partitions == PARTITIONS
            assert set(seen.under_replicated) == set(range(PARTITIONS)), seen
            stop.wait(2.0)  # turns go on against the two brokers left
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert stores.publisher.flush(60)

        local.up(brokers=BROKERS, shards=SHARDS, say=lambda _: None)  # the killed one alone
        in_sync(stack.kafka, stack.topics.memory, BROKERS)
        wait_until(lambda: applied() == sum(turns.values()), "every turn to be projected", _SLOW_S)
        assert worker.poll() is None  # the same worker rode out the failover

        records = stack.read_whole(stack.topics.memory)
    finally:
        deployment.close()
        stop_worker(worker, log)

    assert statuses == {"completed": sum(turns.values())}  # every turn answered
    outage = [h.seconds for h in hooks if killed_at <= h.at <= moved_at]
    before = [h.seconds for h in hooks if h.at < killed_at]
    print(  # docs/scaling.md's figures, shown with -s
        f"broker kill: new leaders {moved_at - killed_at:.1f}s after it; hooks' median "
        f"{statistics.median(before) * 1000:.2f} ms before, "
        f"{statistics.median(outage) * 1000:.2f} ms during ({len(outage)} turns), "
        f"slowest {max(outage) * 1000:.1f} ms"
    )
    assert moved_at - killed_at > 3 * HOOK_BOUND_S, "the failover was too short to tell"
    assert len(outage) >= 20, "too few turns during the failover to tell"
    # Never waiting for the broker: no turn's hooks took the failover's time, and the
    # typical turn's hooks took what they took before it.
    assert max(outage) < HOOK_BOUND_S, sorted(outage)[-5:]
    assert statistics.median(outage) <= 2 * statistics.median(before) + 0.001, (
        statistics.median(outage),
        statistics.median(before),
    )
    # Exactly one record of each turn in the log (acks=all + idempotence), and exactly its
    # two memories (query, answer) projected, tenant by tenant.
    logged = Counter(r.key for r in records)
    for tenant in tenants:
        assert logged[tenant_key(tenant)] == turns[tenant], tenant
        placed.assert_exact(tenant, turns[tenant], 2 * turns[tenant])


@dataclass(frozen=True, slots=True)
class Scene:
    """A test's namespace on the module's cluster, and what it reads it with."""

    env: dict[str, str]
    local: LocalStack
    stack: TestStack
    deployment: Deployment
    placed: Placed
    log: Path


@pytest.fixture
def scene(cluster: tuple[dict[str, str], LocalStack], tmp_path: Path) -> Iterator[Scene]:
    env, local = cluster
    settings = Settings.from_env(env)
    with Deployment(settings) as deployment:
        placed = Placed(deployment)
        yield Scene(env, local, TestStack(settings), deployment, placed, tmp_path / "worker.log")


def notes(stack: TestStack, tenants: Sequence[str], numbers: range) -> list[MemoryEvent]:
    """Note `n` of every tenant, for each n of `numbers`: one memory each."""
    at = datetime.now(UTC)
    return [
        MessageRecorded(
            tenant,
            "t",
            f"{tenant}-m{n}",
            f"{tenant} keeps note {n}",
            "user",
            at,
            0.5,
            stack.model_id,
        )
        for n in numbers
        for tenant in tenants
    ]


def spread(placed: Placed, per_shard: int) -> dict[int, list[str]]:
    """`per_shard` tenants on each shard."""
    found: dict[int, list[str]] = {shard: [] for shard in range(SHARDS)}
    n = 0
    while any(len(own) < per_shard for own in found.values()):
        tenant = f"fault-{n}"
        own = found[placed.shard(tenant)]
        if len(own) < per_shard:
            own.append(tenant)
        n += 1
    return found


def test_a_shard_killed_mid_stream_holds_only_its_tenants_and_heals_from_its_files(
    scene: Scene,
) -> None:
    stack, placed = scene.stack, scene.placed
    on = spread(placed, 2)
    tenants = [tenant for own in on.values() for tenant in own]
    first, later = notes(stack, tenants, range(2)), notes(stack, tenants, range(2, 4))
    live = [tenant for shard in (1, 2) for tenant in on[shard]]
    fresh = notes(stack, live, range(4, 5))
    worker = start_worker(scene.env, scene.log)
    try:
        projecting(scene.deployment, worker, scene.log)
        status = scene.deployment.status()
        stack.publish(first)
        wait_until(lambda: not status.unapplied(first), "the first notes", _SLOW_S)

        stack.publish(later)
        pid = scene.local.pid("redis-0")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # a crash, while the worker projects `later`
        killed_at = time.monotonic()
        wait_until(lambda: scene.local.pid("redis-0") is None, "shard 0 to be gone")
        stack.publish(fresh)
        for tenant in live:  # shards 1 and 2 go on projecting and recalling
            wait_until_recallable(
                scene.deployment, tenant, f"{tenant} keeps note 4", timeout_s=_SLOW_S
            )
        recalled_s = time.monotonic() - killed_at
        stores = scene.deployment.stores()
        for tenant in on[0]:  # the seed's skip: the middleware turns this into Skipped
            with pytest.raises(RedisUnavailableError):
                stores(tenant).search("keeps note", k=10)
        assert scene.local.pid("redis-0") is None  # all of that while shard 0 was down

        scene.local.up(brokers=BROKERS, shards=SHARDS, say=lambda _: None)  # from its files
        restarted_at = time.monotonic()
        everything = first + later + fresh
        wait_until(lambda: not status.unapplied(everything), "shard 0 to heal", _SLOW_S)
        # docs/scaling.md's figures ("Faults, as built"), shown with -s.
        print(
            f"shard kill: the live shards' new memories recalled {recalled_s:.1f}s after it; "
            f"healed {time.monotonic() - restarted_at:.1f}s after the restart answered"
        )
        assert worker.poll() is None  # the same worker rode it out
    finally:
        stop_worker(worker, scene.log)

    for tenant in tenants:
        sent = 4 if tenant in on[0] else 5
        placed.assert_exact(tenant, sent, sent)


EVENTS = 600


def test_a_worker_killed_while_it_writes_to_two_shards_loses_and_doubles_nothing(
    scene: Scene,
) -> None:
    """The worker is SIGKILLed twice mid-stream, each time with batches spanning every
    shard half-written (each shard holds some of what was sent to it, not all); the worker
    that takes over finishes with every event applied once, on its tenant's shard."""
    stack, placed = scene.stack, scene.placed
    on = spread(placed, 4)
    tenants = [tenant for own in on.values() for tenant in own]
    events = notes(stack, tenants, range(EVENTS // len(tenants)))
    sent = {shard: len(own) * (EVENTS // len(tenants)) for shard, own in on.items()}

    def applied_on(shard: int) -> int:
        return sum(placed.applied(tenant) for tenant in on[shard])

    def applied() -> int:
        return sum(applied_on(shard) for shard in on)

    def publish() -> None:
        for i in range(0, len(events), 48):  # each chunk has notes of every shard's tenants
            stack.publish(events[i : i + 48])
            # No more than two chunks ahead of the projection, through the kills too: every
            # shard then moves on together, and no backlog lets a restarted worker finish one
            # shard before it starts another.
            wait_until(lambda done=i: applied() >= done - 48, "the projection to follow", _SLOW_S)

    publishing = threading.Thread(target=publish)
    worker = start_worker(scene.env, scene.log)
    half_written: list[dict[int, int]] = []
    try:
        projecting(scene.deployment, worker, scene.log)
        publishing.start()
        for share in (4, 2):  # from a quarter, then from a half of the events

            def reached(due: int = len(events) // share) -> bool:
                # The kill must land with two shards or more part-way through: waited for,
                # not hoped for (a worker can finish one shard's events in a batch or two).
                midway = sum(0 < applied_on(shard) < sent[shard] for shard in on)
                return applied() >= due and midway >= 2

            wait_until(reached, f"1/{share} of the events applied, 2 shards midway", _SLOW_S)
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait()
            half_written.append({shard: applied_on(shard) for shard in on})
            worker = start_worker(scene.env, scene.log)
        restarted_at = time.monotonic()
        publishing.join()
        status = scene.deployment.status()
        wait_until(lambda: not status.unapplied(events), "every event applied", _SLOW_S)
        print(  # docs/scaling.md's figures, shown with -s
            f"worker kill: every event applied {time.monotonic() - restarted_at:.1f}s after "
            f"the second restart; applied per shard at the kills {half_written} of {sent}"
        )
    finally:
        if publishing.ident is not None:  # started
            publishing.join()
        stop_worker(worker, scene.log)

    # Each kill landed while at least two shards were part-way through what they were sent.
    for at_kill in half_written:
        assert sum(0 < at_kill[shard] < sent[shard] for shard in on) >= 2, (at_kill, sent)
    for tenant in tenants:
        placed.assert_exact(tenant, EVENTS // len(tenants), EVENTS // len(tenants))
