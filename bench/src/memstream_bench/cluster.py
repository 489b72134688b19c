"""A local cluster of the bench's own: `memstream up --brokers B --shards S` on free ports, its
state in a temporary folder, stopped and removed when the bench ends.

`bench scale` kills a broker, so it cannot use the stack the user runs. It starts one the way
an operator does, through the `memstream up | status | down` commands in child processes
(the bench does not import the stack commands: `cli` is above `bench` in the layers), and
reaches it as every process on the machine does, through the topology `up` records in the
state folder (`Settings.from_env` reads it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from memstream.config import Settings
from memstream.errors import StackError
from memstream.processes import port_free, quiet_port
from memstream.topology import PORT_STRIDE

__all__ = ["OwnCluster"]

# Where the settings would name a server, the cluster's topology must be read instead.
_NAMED = ("MEMSTREAM_KAFKA_BOOTSTRAP", "MEMSTREAM_REDIS_URL", "MEMSTREAM_REDIS_SHARDS")
_UP_TIMEOUT_S = 600.0


class OwnCluster:
    """Context manager: B brokers (one KRaft quorum) and S Redis on free ports; `settings`
    reach them; `pids()` names each service's process, `up()` restarts what is down."""

    def __init__(self, settings: Settings, *, brokers: int, shards: int) -> None:
        self.brokers, self.shards = brokers, shards
        self._folder = Path(tempfile.mkdtemp(prefix="memstream-bench-cluster-"))
        own = {k: v for k, v in settings.environ().items() if k not in _NAMED}
        self.env: dict[str, str] = {
            **os.environ,
            **own,
            **_ports(brokers, shards),
            "MEMSTREAM_STATE_DIR": str(self._folder / "stack"),
        }
        for name in _NAMED:
            self.env.pop(name, None)
        self.settings = settings

    def __enter__(self) -> OwnCluster:
        try:
            self.up()
        except BaseException:
            self._remove()
            raise
        self.settings = Settings.from_env(self.env)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._memstream("down")
        finally:
            self._remove()

    @property
    def redis_urls(self) -> tuple[str, ...]:
        return self.settings.shard_urls

    def up(self) -> None:
        """Start every service of the cluster that is not running (all of them, the first
        time); return once each answers."""
        self._memstream("up", "--brokers", str(self.brokers), "--shards", str(self.shards))

    def pids(self) -> dict[str, int]:
        """The running services' pids by name (`kafka-1`, `redis-0`...)."""
        done = subprocess.run(
            [sys.executable, "-m", "memstream", "status", "--json"],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        try:
            services = json.loads(done.stdout)["services"]
        except (ValueError, KeyError) as exc:
            raise StackError(
                f"memstream status --json did not answer ({exc}): {done.stderr}"
            ) from None
        return {s["name"]: int(s["pid"]) for s in services if s["pid"] is not None}

    def _memstream(self, *args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "memstream", *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=_UP_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise StackError(
                f"memstream {' '.join(args)} for the bench's cluster failed:\n"
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )

    def _remove(self) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)


def _ports(brokers: int, shards: int) -> Mapping[str, str]:
    """Base ports whose siblings by the topology's port rule are all free and apart, below the
    ephemeral range: a broker or shard killed and started again finds its port free."""
    span = PORT_STRIDE * max(brokers, shards)
    while True:
        kafka, controller, redis = quiet_port(span), quiet_port(span), quiet_port(span)
        ports = [
            *(base + PORT_STRIDE * i for base in (kafka, controller) for i in range(brokers)),
            *(redis + PORT_STRIDE * i for i in range(shards)),
        ]
        if len(set(ports)) == len(ports) and max(ports) < 65536 and all(map(port_free, ports)):
            return {
                "MEMSTREAM_KAFKA_PORT": str(kafka),
                "MEMSTREAM_KAFKA_CONTROLLER_PORT": str(controller),
                "MEMSTREAM_REDIS_PORT": str(redis),
            }
