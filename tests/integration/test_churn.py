"""Workers that join, leave and are SIGKILLed while six tenants stream: the workers that were
not killed are still running at the end, and every tenant has exactly its memories."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstream import MessageRecorded, Settings
from memstream.deployment import Deployment
from memstream.operations import drop

from .helpers import TestStack, start_worker, wait_until

pytestmark = pytest.mark.integration

TENANTS = 6
CHUNK = 30
AHEAD = 240  # the publisher stays at most this far ahead of the projection: churn meets load
DEADLINE_S = 180.0  # rebalances on 2 loaded cores take seconds each


@pytest.fixture
def churn_env(env: dict[str, str]) -> Iterator[dict[str, str]]:
    namespace = f"churn-{uuid.uuid4().hex[:8]}"
    churn = env | {
        "MEMSTREAM_NAMESPACE": namespace,
        "MEMSTREAM_PARTITIONS": "6",
        "MEMSTREAM_MAX_MEMORIES": "0",
        "MEMSTREAM_WORKER_SESSION_TIMEOUT": "6",  # the broker's minimum: quick takeovers
    }
    yield churn
    drop(Deployment(Settings.from_env(churn)))


class _Workers:
    """The worker processes of the test, each with its own log."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self._env = env
        self._folder = folder
        self.running: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str) -> subprocess.Popen[bytes]:
        self.running[name] = start_worker(self._env, self.log(name))
        return self.running[name]

    def log(self, name: str) -> Path:
        return self._folder / f"{name}.log"

    def wait_projecting(self, name: str) -> None:
        """Until the worker has been assigned partitions and projected a batch of them."""
        process, log = self.running[name], self.log(name)

        def projected() -> bool:
            assert process.poll() is None, f"worker {name} exited: {log.read_text()[-3000:]}"
            return log.exists() and "projected" in log.read_text(errors="replace")

        wait_until(projected, f"worker {name} to project", DEADLINE_S)

    def kill(self, name: str) -> None:
        process = self.running.pop(name)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()

    def leave(self, name: str) -> int:
        process = self.running.pop(name)
        process.terminate()
        return process.wait(timeout=60)

    def crashed(self) -> list[str]:
        """Workers not killed by the test whose log shows Faust's crash handler: a crash late
        in the test may not have ended the process yet when the test looks."""
        return [
            name
            for name in self.running
            if "Crashed reason=" in self.log(name).read_text(errors="replace")
        ]

    def stop_all(self) -> dict[str, int]:
        """Stop every running worker; their exit codes (0: a clean stop)."""
        for process in self.running.values():
            if process.poll() is None:
                process.terminate()
        codes = {}
        for name, process in self.running.items():
            try:
                codes[name] = process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                codes[name] = process.wait()
        return codes


def test_workers_joining_leaving_and_killed_lose_and_double_nothing(
    churn_env: dict[str, str], tmp_path: Path
) -> None:
    stack = TestStack(Settings.from_env(churn_env))
    tenants = [f"churn-{n}" for n in range(TENANTS)]
    at = datetime.now(UTC)
    published: list[MessageRecorded] = []
    stop = threading.Event()
    failures: list[BaseException] = []
    model = stack.model_id

    def applied() -> int:
        keys = stack.status.live()
        return sum(int(stack.redis.hlen(keys.applied(t))) for t in tenants)

    def stream() -> None:
        """Six tenants stream until the churn is over, never more than AHEAD events ahead of
        the projection, so every step of the churn meets a stream in flight."""
        try:
            while not stop.is_set():
                behind = len(published) - AHEAD
                wait_until(lambda b=behind: applied() >= b, "the projection", DEADLINE_S)
                chunk = [
                    MessageRecorded(
                        tenants[n % TENANTS], "t", f"c{n}", f"fact {n}", "u", at, 0.5, model
                    )
                    for n in range(len(published), len(published) + CHUNK)
                ]
                stack.publish(chunk)
                published.extend(chunk)
        except BaseException as exc:  # noqa: BLE001 - re-raised by the test's thread
            failures.append(exc)

    workers = _Workers(churn_env, tmp_path)
    first = workers.start("a")
    stack.wait_until_projecting(first, workers.log("a"))
    publishing = threading.Thread(target=stream)
    publishing.start()
    left: list[int] = []
    try:

        def at_least(count: int) -> None:
            wait_until(lambda: applied() >= count, f"{count} events applied", DEADLINE_S)

        at_least(100)
        workers.start("b")
        workers.start("c")
        workers.wait_projecting("b")
        workers.kill("b")  # mid-stream, with partitions and likely a batch in flight
        workers.start("d")
        workers.wait_projecting("c")
        workers.wait_projecting("d")
        left.append(workers.leave("c"))  # a clean leave: it hands its partitions back
        workers.start("e")
        workers.wait_projecting("e")
        workers.kill("d")
        at_least(applied() + 100)  # the survivors took d's partitions over
        stop.set()
        publishing.join()
        assert not failures, failures
        wait_until(lambda: applied() == len(published), "every event to be applied", DEADLINE_S)
        # Every worker that was not killed is still running (`a` has been through every
        # rebalance of the test).
        gone = {name: p.returncode for name, p in workers.running.items() if p.poll() is not None}
        assert not gone, f"workers exited: {gone}; see {tmp_path}"
    finally:
        stop.set()
        publishing.join()
        stopped = workers.stop_all()

    assert not workers.crashed(), f"workers crashed: {workers.crashed()}; see {tmp_path}"
    assert set(stopped.values()) == {0}, stopped  # every survivor stops cleanly
    assert left == [0]  # the worker that left did so cleanly
    assert len(published) >= 300
    keys = stack.status.live()
    for tenant in tenants:
        mine = {e.id for e in published if e.tenant == tenant}
        markers = {k.decode() for k in stack.redis.hkeys(keys.applied(tenant))}
        assert markers == mine, tenant
        assert stack.stored_memories(tenant) == len(mine), tenant
        assert int(stack.redis.zcard(keys.order(tenant))) == len(mine), tenant
