"""A memstream in containers, through testcontainers: Kafka, Redis, a worker and optionally the
server on a network of their own, reached from the test process on published ports.

The containers and the network are removed by `stop()` itself, so the stack leaves nothing
behind where testcontainers' reaper (Ryuk) cannot run, as under podman.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import httpx

from memstream.cli.stack import broker_answers
from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import StackError
from memstream.memory.events import TurnCompleted
from memstream.processes import free_port
from memstream.projections.connection import RedisConnection, redis_client
from memstream.server.parts import api_keys
from memstream.streams.kafka import KafkaConnection
from memstream.testing.stack import Images, MemstreamStack, probe_event

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

__all__ = ["ContainerStack", "engine_problem"]

# Where a registry answers and `make images` was not run: Kafka and Redis as published.
OFFICIAL_KAFKA = "docker.io/apache/kafka:4.1.1"
OFFICIAL_REDIS = "docker.io/library/redis:8"
_INTERNAL_KAFKA = "kafka:19094"
_READY_S = 180.0


def engine_problem() -> str | None:
    """None when a container engine answers (DOCKER_HOST, or the default socket); otherwise
    why not."""
    try:
        from testcontainers.core.docker_client import DockerClient
    except ModuleNotFoundError as exc:
        return f"{exc.name} is not installed (pip install 'memstream[testing]')"
    try:
        DockerClient().client.ping()
    except Exception as exc:  # noqa: BLE001 - whatever the SDK raises, no engine answers
        return f"no container engine answers ({type(exc).__name__}: {exc})"
    return None


class ContainerStack:
    """Start with `start()`, which returns the running stack; `stop()` removes everything,
    also after a `start()` that failed half-way."""

    def __init__(
        self, images: Images, settings: Mapping[str, str], *, server: bool = False
    ) -> None:
        from testcontainers.core.docker_client import DockerClient
        from testcontainers.core.network import Network

        self._client = DockerClient()
        self._images = images
        self._settings = dict(settings)
        self._server = server
        self._network = Network()
        self._network_made = False
        self._containers: list[DockerContainer] = []

    def stop(self) -> None:
        for container in reversed(self._containers):
            with contextlib.suppress(Exception):  # already gone: nothing left to remove
                container.stop()
        self._containers.clear()
        if self._network_made:
            with contextlib.suppress(Exception):  # removed already
                self._network.remove()
            self._network_made = False

    # -- the parts -------------------------------------------------------------------------

    def start(self) -> MemstreamStack:
        self._require(self._images.memstream)
        self._network.create()
        self._network_made = True
        host = self._client.host()
        kafka_port, redis_port = free_port(), free_port()
        self._run(
            self._kafka_image(), "kafka", _kafka_env(host, kafka_port), ports={9092: kafka_port}
        )
        self._run(self._redis_image(), "redis", {}, ports={6379: redis_port})
        env = {
            **self._settings,
            "MEMSTREAM_KAFKA_BOOTSTRAP": f"{host}:{kafka_port}",
            "MEMSTREAM_REDIS_URL": f"redis://{host}:{redis_port}/0",
        }
        inside = {
            **self._settings,
            "MEMSTREAM_KAFKA_BOOTSTRAP": _INTERNAL_KAFKA,
            "MEMSTREAM_REDIS_URL": "redis://redis:6379/0",
        }
        settings = Settings.from_env(env)
        self._wait(
            lambda: broker_answers(KafkaConnection.from_settings(settings)),
            "Kafka",
            self._containers[0],
        )
        self._wait(lambda: _redis_answers(settings), "Redis", self._containers[1])
        with Deployment(settings) as deployment:
            # The worker creates the topics when it starts; the probe needs them first.
            asyncio.run(deployment.ensure_topics())
            worker = self._run(self._images.memstream, "worker", inside, command=["worker"])
            probe = _publish_probe(deployment)
            self._wait(lambda: not deployment.status().unapplied([probe]), "the worker", worker)
            if not self._server:
                return MemstreamStack(env=env, backend="containers")
            key, _ = api_keys(deployment).create(None)
        port = free_port()
        server = self._run(
            self._images.memstream,
            "server",
            inside,
            command=["serve", "--host", "0.0.0.0", "--port", "8000"],
            ports={8000: port},
        )
        url = f"http://{host}:{port}"
        self._wait(lambda: _healthy(url), "the server", server)
        return MemstreamStack(env=env, backend="containers", server_url=url, api_key=key)

    def _run(
        self,
        image: str,
        alias: str,
        env: Mapping[str, str],
        *,
        command: list[str] | None = None,
        ports: Mapping[int, int] | None = None,
    ) -> DockerContainer:
        from testcontainers.core.container import DockerContainer

        container = (
            DockerContainer(image)
            .with_name(f"memstream-test-{alias}-{uuid.uuid4().hex[:8]}")
            .with_network(self._network)
            .with_network_aliases(alias)
            .with_envs(**env)
        )
        for inner, outer in (ports or {}).items():
            container = container.with_bind_ports(inner, outer)
        if command:
            container = container.with_command(command)
        self._containers.append(container)
        container.start()
        return container

    def _wait(self, ready: Callable[[], bool], what: str, container: DockerContainer) -> None:
        deadline = time.monotonic() + _READY_S
        while True:
            with contextlib.suppress(Exception):  # not answering yet is what we wait out
                if ready():
                    return
            if time.monotonic() > deadline:
                raise StackError(f"{what} was not ready after {_READY_S:.0f}s:\n{_logs(container)}")
            time.sleep(0.2)

    def _kafka_image(self) -> str:
        return self._images.kafka if self._has(self._images.kafka) else OFFICIAL_KAFKA

    def _redis_image(self) -> str:
        return self._images.redis if self._has(self._images.redis) else OFFICIAL_REDIS

    def _has(self, image: str) -> bool:
        from docker.errors import ImageNotFound

        try:
            self._client.client.images.get(image)
        except ImageNotFound:
            return False
        return True

    def _require(self, image: str) -> None:
        if not self._has(image):
            raise StackError(
                f"the image {image} is not in the container engine: build it with `make images` "
                "(or name another one with --memstream-image)"
            )


def _kafka_env(host: str, port: int) -> dict[str, str]:
    """One KRaft broker and controller: EXTERNAL for the test process on the published port,
    INTERNAL for the worker and server on the stack's network. Both this project's image and
    apache/kafka read these variables."""
    return {
        "CLUSTER_ID": "bWVtc3RyZWFtLXRlc3Rpbg",
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": "EXTERNAL://:9092,INTERNAL://:19094,CONTROLLER://:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"EXTERNAL://{host}:{port},INTERNAL://{_INTERNAL_KAFKA}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": (
            "CONTROLLER:PLAINTEXT,EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT"
        ),
        "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
    }


def _publish_probe(deployment: Deployment) -> TurnCompleted:
    """A probe event, published now (applied once the worker projects)."""
    probe = probe_event(deployment.embedding_model)

    async def publish() -> None:
        async with deployment.event_publisher() as publisher:
            await publisher.publish([probe])

    asyncio.run(publish())
    return probe


def _redis_answers(settings: Settings) -> bool:
    return bool(redis_client(RedisConnection.from_settings(settings)).ping())


def _healthy(url: str) -> bool:
    return httpx.get(f"{url}/v1/health", timeout=2).status_code == 200


def _logs(container: DockerContainer) -> str:
    try:
        out, err = container.get_logs()
    except Exception as exc:  # noqa: BLE001 - the logs only explain; their absence too
        return f"(no logs: {exc})"
    return (out + err).decode(errors="replace")[-3000:]
