"""A memstream from the local binaries, where no container engine answers: the Kafka and Redis
the `MEMSTREAM_*` settings reach (a `memstream up` stack), or else a stack of its own started
from this checkout's binaries on free ports; a worker process (and optionally `memstream serve`)
on a fresh namespace, which `stop()` drops.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import httpx

from memstream.cli.stack import LocalStack, kafka_answers
from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.operations import drop, worker_process
from memstream.processes import free_port, project_root, running
from memstream.projections.connection import RedisConnection, redis_client
from memstream.server.parts import api_keys
from memstream.streams.kafka import KafkaConnection
from memstream.testing.stack import MemstreamStack, probe_event

__all__ = ["LocalBinariesStack"]


class LocalBinariesStack:
    """Start with `start()`, which returns the running stack; `stop()` stops what it started
    and drops the namespace, also after a `start()` that failed half-way."""

    def __init__(self, settings: Mapping[str, str], folder: Path, *, server: bool = False) -> None:
        self._settings = dict(settings)
        self._folder = folder
        self._server = server
        self._exits = contextlib.ExitStack()
        self._deployment: Deployment | None = None

    def stop(self) -> None:
        try:
            self._exits.close()
        finally:
            if self._deployment is not None:
                with contextlib.suppress(Exception):  # a stack that never came up has nothing
                    drop(self._deployment)
                self._deployment.close()
                self._deployment = None

    def start(self) -> MemstreamStack:
        env = dict(self._settings)
        if not _answers(Settings.from_env(env)):
            env |= self._own_servers()
        settings = Settings.from_env(env)
        self._deployment = deployment = Deployment(settings)
        probe = probe_event(deployment.embedding_model)
        self._exits.enter_context(worker_process(deployment, self._folder / "worker.log", probe))
        if not self._server:
            return MemstreamStack(env=env, backend="local")
        key, _ = api_keys(deployment).create(None)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        self._exits.enter_context(
            running(
                [sys.executable, "-m", "memstream", "serve", "--port", str(port)],
                env={**os.environ, **env},
                log=self._folder / "server.log",
                ready=lambda: _healthy(url),
                what="memstream serve",
            )
        )
        return MemstreamStack(env=env, backend="local", server_url=url, api_key=key)

    def _own_servers(self) -> dict[str, str]:
        """Kafka and Redis of this stack's own, from the checkout's binaries (`make install`),
        on free ports, their state in the stack's folder; stopped by `stop()`."""
        ports = {
            "MEMSTREAM_KAFKA_PORT": str(free_port()),
            "MEMSTREAM_KAFKA_CONTROLLER_PORT": str(free_port()),
            "MEMSTREAM_REDIS_PORT": str(free_port()),
            "MEMSTREAM_STATE_DIR": str(self._folder / "state"),
        }
        env = {
            **{k: v for k, v in self._settings.items() if k not in _WHERE},
            **ports,
        }
        stack = LocalStack(Settings.from_env(env), project_root())
        self._exits.callback(stack.down, lambda _: None)
        stack.up(say=lambda _: None)
        return {
            **ports,
            "MEMSTREAM_KAFKA_BOOTSTRAP": f"127.0.0.1:{ports['MEMSTREAM_KAFKA_PORT']}",
            "MEMSTREAM_REDIS_URL": f"redis://127.0.0.1:{ports['MEMSTREAM_REDIS_PORT']}/0",
        }


_WHERE = ("MEMSTREAM_KAFKA_BOOTSTRAP", "MEMSTREAM_REDIS_URL")


def _answers(settings: Settings) -> bool:
    try:
        if not redis_client(RedisConnection.from_settings(settings)).ping():
            return False
        return kafka_answers(KafkaConnection.from_settings(settings))
    except Exception:  # noqa: BLE001 - any failure means there is nothing to reuse
        return False


def _healthy(url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"{url}/v1/health", timeout=2).status_code == 200
    return False
