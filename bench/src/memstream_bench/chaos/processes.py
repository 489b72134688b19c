"""The processes a chaos run fails and starts again: the cluster's brokers and Redis shards
(started by `memstream up`, found by `memstream status`), and its own workers and servers.

Each is a `Target`: it can be killed (SIGKILL), paused (SIGSTOP) and resumed (SIGCONT), and
started again; `start` returns once the process answers, so a fault's end is when the thing
is back, not when a command was sent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from memstream.errors import StackError
from memstream.processes import stop
from memstream_bench.cluster import OwnCluster

__all__ = ["Child", "ClusterService", "Target", "server_command", "worker_command"]

_READY_S = 180.0  # a start on a machine busy with the run's load


class Target(Protocol):
    name: str

    def pid(self) -> int | None: ...

    def start(self) -> None:
        """Start it if it is not running; return once it answers."""
        ...

    def recover(self) -> None:
        """Return once it serves again after a fault: started if it is down, and caught up
        where it must catch up before it counts as back."""
        ...


def send(target: Target, sig: signal.Signals) -> bool:
    """`sig` to the target's process; False if it runs no process now."""
    pid = target.pid()
    if pid is None:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
        return True
    return False


class ClusterService:
    """A broker (`kafka-N`) or a Redis shard (`redis-N`) of the run's cluster. A broker is
    back once it is in every partition's in-sync replicas again (`caught_up`): until then a
    second broker down would leave partitions one replica short of min.insync.replicas."""

    def __init__(
        self, cluster: OwnCluster, name: str, caught_up: Callable[[], bool] = lambda: True
    ) -> None:
        self.name = name
        self._cluster = cluster
        self._caught_up = caught_up

    def pid(self) -> int | None:
        return self._cluster.pids().get(self.name)

    def start(self) -> None:
        # `memstream up` starts whatever is down and returns once each service answers.
        self._cluster.up()

    def recover(self) -> None:
        if self.pid() is None:
            self.start()
        _wait(self._caught_up, f"{self.name} to catch up")


class Child:
    """A `memstream` process of the run's own (a worker, a server), output appended to `log`."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        env: Mapping[str, str],
        log: Path,
        ready: Callable[[], bool],
    ) -> None:
        self.name = name
        self._command, self._env, self._log, self._ready = list(command), dict(env), log, ready
        self._process: subprocess.Popen[bytes] | None = None

    def pid(self) -> int | None:
        if self._process is None or self._process.poll() is not None:
            return None
        return self._process.pid

    def start(self) -> None:
        if self.pid() is not None:
            return
        with self._log.open("ab") as out:
            self._process = subprocess.Popen(
                self._command, env=self._env, stdout=out, stderr=subprocess.STDOUT
            )
        process = self._process

        def ready() -> bool:
            if process.poll() is not None:
                tail = self._log.read_text(errors="replace")[-3000:]
                raise StackError(f"{self.name} exited as it started:\n{tail}")
            return self._ready()

        _wait(ready, f"{self.name} to get ready")

    def recover(self) -> None:
        self.start()

    def reap(self) -> None:
        """Collect a killed process's exit, so its pid is not a zombie's."""
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=30)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            send(self, signal.SIGCONT)
            stop(self._process)


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _READY_S
    while not condition():
        if time.monotonic() > deadline:
            raise StackError(f"waited {_READY_S:.0f}s for {what}")
        time.sleep(0.1)


def worker_command() -> list[str]:
    return [
        sys.executable,
        "-m",
        "memstream",
        "worker",
        "--loglevel",
        "warning",
        "--metrics-port",
        "0",
    ]


def server_command(port: int) -> list[str]:
    return [sys.executable, "-m", "memstream", "serve", "--port", str(port)]
