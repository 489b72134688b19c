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
from memstream.processes import quiet_port

from .helpers import (
    DEADLINE_S,
    TestStack,
    start_worker,
    stop_worker,
    wait_until,
    worker_stacks,
)

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


def messages(stack: TestStack, name: str, count: int) -> tuple[list[str], list[MessageRecorded]]:
    """TENANTS tenants named after `name`, and `count` messages recorded in turn for them."""
    tenants = [f"{name}-{n}" for n in range(TENANTS)]
    at = datetime.now(UTC)
    events = [
        MessageRecorded(
            tenants[n % TENANTS], "t", f"{name}{n}", f"note {n}", "u", at, 0.5, stack.model_id
        )
        for n in range(count)
    ]
    return tenants, events


def test_sigkill_mid_stream_loses_and_doubles_nothing(
    crash_env: dict[str, str], tmp_path: Path
) -> None:
    stack = TestStack(Settings.from_env(crash_env))
    tenants, events = messages(stack, "crash", EVENTS)
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


def test_a_worker_whose_stream_stalls_exits_saying_so_and_its_successor_loses_nothing(
    crash_env: dict[str, str], tmp_path: Path
) -> None:
    # faust-streaming's consumer, after a broker came back, once stopped handing over messages
    # for good, the worker alive and idle; `stalling_worker.py` makes it stall at will.
    stalling = crash_env | {"MEMSTREAM_WORKER_STALL_S": "4", "MEMSTREAM_TEST_STALL_AFTER": "1"}
    stack = TestStack(Settings.from_env(crash_env))
    tenants, events = messages(stack, "stall", EVENTS // 6)
    log = tmp_path / "worker.log"
    worker = start_worker(
        stalling, log, program=[str(Path(__file__).with_name("stalling_worker.py"))]
    )
    try:
        stack.wait_until_projecting(worker, log)  # its probe: the one message it hands over
        stack.publish(events)
        worker.wait(timeout=DEADLINE_S)
    finally:
        if worker.poll() is None:
            stop_worker(worker, log)
    said = log.read_text(errors="replace")
    assert worker.returncode != 0, said[-3000:]
    assert "the memory topic's stream delivered nothing for" in said, said[-3000:]
    assert "its consumer has stalled; the worker exits" in said
    assert "THREAD " in said and "_drain_messages" in said  # where Faust waited, for a report
    assert stack.status.unapplied(events) == events  # the stall held every one back

    successor = start_worker(crash_env, tmp_path / "successor.log")
    try:
        stack.wait_applied(events)
    finally:
        stop_worker(successor, tmp_path / "successor.log")
    assert sum(stack.stored_memories(t) for t in tenants) == len(events)


@pytest.fixture
def own_stack(crash_env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:
    """A broker and a Redis of this test's own, their state in `tmp_path`: killing the suite's
    shared broker would fail whatever else runs beside this test. Their ports are below the
    ephemeral range: while the broker is down, a client's outgoing connection could take an
    ephemeral one, or connect to itself on it (the clients retry it every 0.1 s)."""
    own = {key: value for key, value in crash_env.items() if key not in _SERVERS}
    own |= {
        "MEMSTREAM_KAFKA_PORT": str(quiet_port()),
        "MEMSTREAM_KAFKA_CONTROLLER_PORT": str(quiet_port()),
        "MEMSTREAM_REDIS_PORT": str(quiet_port()),
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
    # A stall is told in 20-30 s, well past the seconds the worker takes to rejoin.
    crash_env = own_stack | {"MEMSTREAM_WORKER_STALL_S": "20"}
    settings = Settings.from_env(crash_env)
    stack_dir = LocalStack(settings)
    kafka_pid = stack_dir.pid("kafka")
    assert kafka_pid is not None
    stack = TestStack(settings)
    tenants, events = messages(stack, "broker", EVENTS * 2)
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

        def projected_or_exited() -> bool:
            return worker.poll() is not None or not stack.status.unapplied(events)

        try:
            wait_until(projected_or_exited, "all projected, or the worker gone", 2 * DEADLINE_S)
            if worker.poll() is not None:
                # Faust's consumer may stall for good after a broker restart (about once in
                # seven full runs): the worker must then say so and exit, and a successor
                # take over.
                said = log.read_text(errors="replace")
                assert "its consumer has stalled; the worker exits" in said
                worker = start_worker(crash_env, log)
            stack.wait_applied(events)
        except AssertionError as exc:  # say where the worker waits, or why it exited
            raise AssertionError(f"{exc}; the worker:\n{worker_stacks(worker, log)}") from exc
        assert worker.poll() is None  # the worker that rode it out, or its successor, runs on
    finally:
        stop_worker(worker, log)

    assert down_at < len(before)  # the broker went down mid-stream
    assert applied() == len(events)
    assert sum(stack.stored_memories(t) for t in tenants) == len(events)
