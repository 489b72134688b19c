"""A broker of a three-broker cluster SIGKILLed mid-stream, the leader of busy partitions:
agent turns never wait for it, nothing is lost or doubled per tenant, and restarted it
rejoins every partition's in-sync replicas.

The cluster is the test's own (`memstream up --brokers 3` on free ports, its state in
tmp_path): killing a broker of the suite's shared stack would fail whatever runs beside it.
Its processes find it as every process on the machine does, through the topology `up`
recorded in the state folder: the test names no bootstrap server.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memstream import Settings
from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.cli.stack import LocalStack
from memstream.deployment import Deployment
from memstream.hooks import RecordConfig, SemanticMemoryMiddleware
from memstream.memory.tenancy import tenant_key
from memstream.processes import free_port, port_free
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import partition_leaders
from memstream.streams.wire import partition_of
from memstream.topology import PORT_STRIDE

from .helpers import TestStack, start_worker, wait_until

pytestmark = pytest.mark.integration

BROKERS = 3
PARTITIONS = 6  # two led by each broker, so the killed one leads some and not all
TENANTS = 12
THREADS = 4
TURN_EVERY_S = 0.1  # each thread's pace: ~40 turns/s in all, what one worker keeps up with
# A turn's hooks hand its event to the background publisher and return; a hook that waited
# for the broker would take the whole failover (asserted to last at least this long).
HOOK_BOUND_S = 1.0
# A JVM's start and a backlog's projection on the busy shared machine.
_SLOW_S = 180.0
_SERVERS = ("MEMSTREAM_KAFKA_BOOTSTRAP", "MEMSTREAM_REDIS_URL", "MEMSTREAM_STATE_DIR")


def _cluster_ports() -> dict[str, str]:
    """Base ports whose brokers' and controllers' siblings (memstream.topology's rule) are
    free too."""
    while True:
        kafka, controller, redis = free_port(), free_port(), free_port()
        ports = [base + PORT_STRIDE * i for base in (kafka, controller) for i in range(BROKERS)]
        if len(set([*ports, redis])) == len(ports) + 1 and all(map(port_free, ports)):
            return {
                "MEMSTREAM_KAFKA_PORT": str(kafka),
                "MEMSTREAM_KAFKA_CONTROLLER_PORT": str(controller),
                "MEMSTREAM_REDIS_PORT": str(redis),
            }


@pytest.fixture
def cluster(env: dict[str, str], tmp_path: Path) -> Iterator[tuple[dict[str, str], LocalStack]]:
    """Three brokers (a KRaft quorum of three) and a Redis of this test's own, and the
    settings that reach them: only the state folder, as on a machine after `memstream up`."""
    own = {key: value for key, value in env.items() if key not in _SERVERS}
    own |= _cluster_ports() | {
        "MEMSTREAM_STATE_DIR": str(tmp_path / "stack"),
        "MEMSTREAM_NAMESPACE": f"failover-{uuid.uuid4().hex[:8]}",
        "MEMSTREAM_PARTITIONS": str(PARTITIONS),
        "MEMSTREAM_MAX_MEMORIES": "0",  # unbounded: every memory stays to be counted
    }
    stack = LocalStack(Settings.from_env(own))
    try:
        stack.up(brokers=BROKERS, say=lambda _: None)
        yield own, stack
    finally:
        stack.down(say=lambda _: None)


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


def _leaders(kafka: KafkaConnection, topic: str) -> dict[int, tuple[int, int]]:
    return asyncio.run(partition_leaders(kafka, topic))


def test_the_leader_of_busy_partitions_killed_mid_stream_blocks_no_turn_and_loses_nothing(
    cluster: tuple[dict[str, str], LocalStack], tmp_path: Path
) -> None:
    env, local = cluster
    settings = Settings.from_env(env)
    assert settings.bootstrap_servers.count(",") == BROKERS - 1  # found through the topology
    stack = TestStack(settings)
    deployment = Deployment(settings)
    log = tmp_path / "worker.log"
    worker = start_worker(env, log)
    try:
        stack.wait_until_projecting(worker, log)
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
            keys = stack.status.live()
            return sum(int(stack.redis.hlen(keys.applied(t))) for t in tenants)

        busy = {partition_of(t, PARTITIONS) for t in tenants}
        leaders = _leaders(stack.kafka, stack.topics.memory)
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
                now = _leaders(stack.kafka, stack.topics.memory)
                return bool(now) and all(now[p][0] not in (victim, -1) for p in led)

            wait_until(moved, "the killed broker's partitions to get new leaders")
            moved_at = time.monotonic()
            stop.wait(2.0)  # turns go on against the two brokers left
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert stores.publisher.flush(60)

        local.up(brokers=BROKERS, say=lambda _: None)  # the killed broker alone restarts
        wait_until(
            lambda: (
                (now := _leaders(stack.kafka, stack.topics.memory)) != {}
                and all(isr == BROKERS for _, isr in now.values())
            ),
            "the restarted broker to rejoin every partition's in-sync replicas",
            timeout=_SLOW_S,
        )
        wait_until(lambda: applied() == sum(turns.values()), "every turn to be projected", _SLOW_S)
        assert worker.poll() is None  # the same worker rode out the failover

        ends = stack.end_offsets(stack.topics.memory)
        records = stack.read_topic(stack.topics.memory, lambda rs: len(rs) >= sum(ends.values()))
    finally:
        deployment.close()
        worker.terminate()
        worker.wait(timeout=30)

    assert statuses == {"completed": sum(turns.values())}  # every turn answered
    outage = [h.seconds for h in hooks if killed_at <= h.at <= moved_at]
    before = [h.seconds for h in hooks if h.at < killed_at]
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
    keys = stack.status.live()
    for tenant in tenants:
        assert logged[tenant_key(tenant)] == turns[tenant], tenant
        assert int(stack.redis.hlen(keys.applied(tenant))) == turns[tenant], tenant
        assert stack.stored_memories(tenant) == 2 * turns[tenant], tenant
