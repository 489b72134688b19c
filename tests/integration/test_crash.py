"""A worker or a broker killed with SIGKILL mid-stream loses nothing and doubles nothing."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstream import MessageRecorded, Settings
from memstream.cli.stack import LocalStack
from memstream.deployment import Deployment
from memstream.operations import drop
from memstream.processes import free_port

from .helpers import TestStack, start_worker, stop_worker, wait_until, worker_stacks

pytestmark = pytest.mark.integration

EVENTS = 600
TENANTS = 4


@pytest.fixture
def crash_env(env: dict[str, str], settings: Settings) -> Iterator[dict[str, str]]:
    """A namespace of its own (its worker is killed), unbounded so every memory stays."""
    namespace = f"crash-{uuid.uuid4().hex[:8]}"
    crash = env | {
        "MEMSTREAM_NAMESPACE": namespace,
        "MEMSTREAM_MAX_MEMORIES": "0",
        "MEMSTREAM_WORKER_SESSION_TIMEOUT": "6",  # the broker's minimum: a quick takeover
    }
    yield crash
    drop(Deployment(Settings.from_env(crash)))


def test_sigkill_mid_stream_loses_and_doubles_nothing(
    crash_env: dict[str, str], tmp_path: Path
) -> None:
    stack = TestStack(Settings.from_env(crash_env))
    tenants = [f"crash-{n}" for n in range(TENANTS)]
    at = datetime.now(UTC)
    events = [
        MessageRecorded(
            tenants[n % TENANTS], "t", f"m{n}", f"message {n}", "u", at, 0.5, stack.model_id
        )
        for n in range(EVENTS)
    ]
    log = tmp_path / "worker.log"
    worker = start_worker(crash_env, log)
    stack.wait_until_projecting(worker, log)

    def applied() -> int:
        keys = stack.status.live()
        return sum(int(stack.redis.hlen(keys.applied(t))) for t in tenants)

    # The last third waits for the kill: however big the worker's batches, the kill lands
    # with events still to come (and maybe a batch in flight).
    killed = threading.Event()

    def publish() -> None:
        for i in range(0, EVENTS, 50):
            if i >= 2 * EVENTS // 3:
                killed.wait(timeout=120)
            stack.publish(events[i : i + 50])

    publishing = threading.Thread(target=publish)
    publishing.start()
    try:
        wait_until(lambda: applied() >= EVENTS // 3, "a third of the events to be applied")
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        killed_at = applied()
        killed.set()
        restarted = start_worker(crash_env, log)
        try:
            publishing.join()
            stack.wait_applied(events)
        finally:
            restarted.terminate()
            restarted.wait(timeout=30)
    finally:
        killed.set()
        publishing.join()

    assert EVENTS // 3 <= killed_at <= 2 * EVENTS // 3  # the kill did land mid-stream
    assert applied() == EVENTS
    assert sum(stack.stored_memories(t) for t in tenants) == EVENTS
    order = sum(int(stack.redis.zcard(stack.status.live().order(t))) for t in tenants)
    assert order == EVENTS


@pytest.fixture
def own_stack(crash_env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:
    """A broker and a Redis of this test's own, on free ports, their state in `tmp_path`:
    killing the suite's shared broker would fail whatever else runs beside this test."""
    own = {key: value for key, value in crash_env.items() if key not in _SERVERS}
    own |= {
        "MEMSTREAM_KAFKA_PORT": str(free_port()),
        "MEMSTREAM_KAFKA_CONTROLLER_PORT": str(free_port()),
        "MEMSTREAM_REDIS_PORT": str(free_port()),
        "MEMSTREAM_STATE_DIR": str(tmp_path / "stack"),
    }
    stack = LocalStack(Settings.from_env(own))
    try:
        stack.up(say=lambda _: None)
        yield own
    finally:
        stack.down(say=lambda _: None)


_SERVERS = ("MEMSTREAM_KAFKA_BOOTSTRAP", "MEMSTREAM_REDIS_URL")


def test_a_broker_killed_and_restarted_mid_stream_loses_and_doubles_nothing(
    own_stack: dict[str, str], tmp_path: Path
) -> None:
    settings = Settings.from_env(own_stack)
    stack_dir = LocalStack(settings)
    kafka_pid = stack_dir.pid("kafka")
    assert kafka_pid is not None
    stack = TestStack(settings)
    crash_env = own_stack
    tenants = [f"broker-{n}" for n in range(TENANTS)]
    at = datetime.now(UTC)
    events = [
        MessageRecorded(
            tenants[n % TENANTS], "t", f"b{n}", f"note {n}", "u", at, 0.5, stack.model_id
        )
        for n in range(EVENTS * 2)
    ]
    log = tmp_path / "worker.log"
    worker = start_worker(crash_env, log)
    try:
        stack.wait_until_projecting(worker, log)
        # Asked for its stacks (docs/operations.md, "Troubleshooting"), it says and goes on.
        stacks = worker_stacks(worker, log)
        assert "most recent call first" in stacks and "THREAD " in stacks, stacks[-3000:]
        before, after = events[:EVENTS], events[EVENTS:]
        stack.publish(before)

        def applied() -> int:
            keys = stack.status.live()
            return sum(int(stack.redis.hlen(keys.applied(t))) for t in tenants)

        wait_until(lambda: applied() >= 50, "the first events to be applied")
        down_at = applied()
        os.kill(kafka_pid, signal.SIGKILL)  # a broker crash, not a clean shutdown
        wait_until(lambda: stack_dir.pid("kafka") is None, "the broker to be gone")
        stack_dir.up(say=lambda _: None)
        stack.publish(after)  # the worker must go on consuming from the restarted broker
        try:
            stack.wait_applied(events)
        except AssertionError as exc:  # say where the worker waits (seen once, not reproduced)
            raise AssertionError(f"{exc}; the worker:\n{worker_stacks(worker, log)}") from exc
        assert worker.poll() is None  # the same worker rode out the outage
    finally:
        stop_worker(worker, log)

    assert down_at < len(before)  # the broker went down mid-stream
    assert applied() == len(events)
    assert sum(stack.stored_memories(t) for t in tenants) == len(events)
