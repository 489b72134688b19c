"""The pytest plugin (entry point `pytest11: memstream`): the `memstream_stack` session fixture,
`memstream_tenant`, `memstream_memory` (a deployment with the in-memory projection, no
services), and the options choosing how the stack runs.

- `--memstream-backend auto|containers|local` (ini `memstream_backend`): `auto`, the
  default, runs containers when an engine answers and the local binaries otherwise.
- `--memstream-server` (ini `memstream_server = true`): run `memstream serve` too.
- `--memstream-image`, `--memstream-kafka-image`, `--memstream-redis-image` (ini keys alike):
  the images; by default those `make images` builds, with the official Kafka and Redis where
  those are absent.

The stack's settings start from the `memstream_settings` fixture (override it in a conftest to
set `MEMSTREAM_*` values such as the embedder); the plugin adds a fresh namespace and master key.
Nothing here imports testcontainers or starts anything until a test asks for the stack.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import pytest

from memstream.testing.stack import Images, MemstreamStack

if TYPE_CHECKING:
    from memstream.deployment import Deployment

_BACKENDS = ("auto", "containers", "local")
_DEFAULT_IMAGES = Images()
_OPTIONS = {
    "memstream_backend": ("auto", "how the stack runs: auto, containers or local"),
    "memstream_image": (_DEFAULT_IMAGES.memstream, "the memstream image of a container stack"),
    "memstream_kafka_image": (_DEFAULT_IMAGES.kafka, "the Kafka image of a container stack"),
    "memstream_redis_image": (
        _DEFAULT_IMAGES.redis,
        "the Redis (with search) image of a container stack",
    ),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memstream")
    for name, (default, help_text) in _OPTIONS.items():
        flag = "--" + name.replace("_", "-")
        group.addoption(flag, dest=name, default=None, help=f"{help_text} (default {default})")
        parser.addini(name, help_text, default=default)
    group.addoption(
        "--memstream-server",
        dest="memstream_server",
        action="store_true",
        default=None,
        help="run `memstream serve` in the stack too (stack.server_url, stack.api_key)",
    )
    parser.addini("memstream_server", "run `memstream serve` in the stack too", type="bool")


def _option(config: pytest.Config, name: str) -> str:
    value = config.getoption(name)
    return str(value if value is not None else config.getini(name))


@pytest.fixture(scope="session")
def memstream_settings() -> dict[str, str]:
    """Extra `MEMSTREAM_*` settings of the session's stack (none); override it to set some."""
    return {}


@pytest.fixture(scope="session")
def memstream_stack(
    request: pytest.FixtureRequest,
    memstream_settings: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[MemstreamStack]:
    """A running memstream for the session: Kafka, Redis and a worker (and the server with
    --memstream-server), in containers when an engine answers, else from local binaries. Its
    `.env` reaches it; `.deployment()` builds on it. Removed at the end of the session."""
    config = request.config
    backend = _option(config, "memstream_backend")
    if backend not in _BACKENDS:
        raise pytest.UsageError(
            f"--memstream-backend={backend!r}: use one of {', '.join(_BACKENDS)}"
        )
    server = bool(config.getoption("memstream_server") or config.getini("memstream_server"))
    settings = {
        "MEMSTREAM_NAMESPACE": f"test-{uuid.uuid4().hex[:10]}",
        "MEMSTREAM_PARTITIONS": "2",
        "MEMSTREAM_MASTER_KEY": base64.b64encode(os.urandom(32)).decode(),
        # A port of the user's environment may be taken by their own worker.
        "MEMSTREAM_WORKER_METRICS_PORT": "0",
        **memstream_settings,
    }
    in_containers = False
    if backend != "local":
        from memstream.testing.containers import engine_problem

        problem = engine_problem()
        if problem and backend == "containers":
            raise pytest.UsageError(f"--memstream-backend=containers: {problem}")
        in_containers = problem is None
    stack: _Startable
    if in_containers:
        from memstream.testing.containers import ContainerStack

        images = Images(
            memstream=_option(config, "memstream_image"),
            kafka=_option(config, "memstream_kafka_image"),
            redis=_option(config, "memstream_redis_image"),
        )
        stack = ContainerStack(images, settings, server=server)
    else:
        from memstream.testing.local import LocalBinariesStack

        reach = {k: v for k, v in os.environ.items() if k.startswith("MEMSTREAM_")}
        folder = tmp_path_factory.mktemp("memstream")
        stack = LocalBinariesStack({**reach, **settings}, folder, server=server)
    try:
        yield stack.start()
    finally:
        stack.stop()


@pytest.fixture
def memstream_memory(memstream_settings: dict[str, str]) -> Iterator[Deployment]:
    """A deployment on a fresh namespace of the in-memory projection (MEMSTREAM_BACKEND=memory,
    the `memstream_settings` too): no Kafka, no Redis; `memstream.testing.project` applies
    events to it as a worker would. Dropped at the end of the test."""
    from memstream.testing.memory import memory_deployment

    deployment = memory_deployment(memstream_settings)
    try:
        yield deployment
    finally:
        deployment.close()
        deployment.projection.drop()


@pytest.fixture
def memstream_tenant() -> str:
    """A tenant id no other test uses."""
    return f"tenant-{uuid.uuid4().hex[:12]}"


class _Startable(Protocol):
    def start(self) -> MemstreamStack: ...
    def stop(self) -> None: ...
