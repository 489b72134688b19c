"""The real stack for integration tests: the Kafka and Redis that `memstream up` (or .ci/run)
started, one fresh namespace per test session, and a real worker process projecting it.

In CI (CI=true) an unreachable stack is a failure; elsewhere the tests are skipped, saying why.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import redis
from agent_memory_client import MemoryAPIClient

from memstream import Settings
from memstream.deployment import Deployment
from memstream.errors import StackError
from memstream.operations import drop
from memstream.processes import free_port
from memstream.projections.connection import RedisConnection, redis_client
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import Topics, ensure_topics

from .helpers import TestStack, running_worker
from .secure_stack import SecureStack
from .serving import ams_client, new_tenant, serving, tenant_key

pytestmark = pytest.mark.integration

MAX_MEMORIES = 40


def _stack_problem(settings: Settings) -> str | None:
    try:
        redis_client(RedisConnection.from_settings(settings)).ping()
    except redis.RedisError as exc:
        return f"Redis at {settings.redis} does not answer ({exc})"
    try:
        asyncio.run(
            ensure_topics(KafkaConnection.from_settings(settings), Topics(settings.namespace, 2))
        )
    except Exception as exc:  # noqa: BLE001 - any failure means the broker is not usable
        return f"Kafka at {settings.bootstrap_servers} does not answer ({exc})"
    return None


@pytest.fixture(scope="session")
def env() -> dict[str, str]:
    # One namespace per session, so per pytest-xdist worker too: the workers' tests never see
    # each other's topics, keys or tenants.
    namespace = f"test-{uuid.uuid4().hex[:10]}"
    # A small bound, so that workloads of a few dozen events evict.
    return {
        **os.environ,
        "MEMSTREAM_NAMESPACE": namespace,
        "MEMSTREAM_PARTITIONS": "2",
        "MEMSTREAM_MAX_MEMORIES": str(MAX_MEMORIES),
        # Short consolidation windows keep consolidation tests quick; the worker summarises
        # with the extractive summariser (no chat model configured).
        "MEMSTREAM_CONSOLIDATION_WINDOW_S": "0.5",
        "MEMSTREAM_CHAT_BASE_URL": "",
        # The workers the tests start serve no metrics unless a test gives a port: several run
        # at once and would contend for the stack's.
        "MEMSTREAM_WORKER_METRICS_PORT": "0",
    }


@pytest.fixture(scope="session")
def settings(env: dict[str, str]) -> Iterator[Settings]:
    settings = Settings.from_env(env)
    problem = _stack_problem(settings)
    if problem:
        message = f"{problem}; start the stack with `memstream up` (make test does)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    yield settings
    drop(Deployment(settings))


@pytest.fixture(scope="session")
def worker(
    settings: Settings, env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A `memstream worker` process on the session's namespace; yields its log file."""
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with running_worker(env, log):
        yield log


@pytest.fixture
def stack(settings: Settings, worker: Path) -> TestStack:
    return TestStack(settings)


@pytest.fixture(scope="session")
def server(
    settings: Settings,
    env: dict[str, str],
    worker: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """A `memstream serve` process on the session's namespace; yields its base URL."""
    with serving(env, tmp_path_factory.mktemp("server") / "server.log") as url:
        yield url


@pytest.fixture(scope="session")
def secure_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureStack]:
    """A broker that takes only SASL_SSL (SCRAM, mutual TLS, ACLs on) and a Redis that takes
    only TLS with ACL users, on free ports, their certificates made in a temporary folder;
    stopped at the end of the session."""
    stack = SecureStack(
        tmp_path_factory.mktemp("secure"),
        kafka_port=free_port(),
        controller_port=free_port(),
        redis_port=free_port(),
    )
    try:
        stack.start()
    except (StackError, OSError) as exc:  # no openssl, no java, no jars: `make install`
        stack.stop()
        message = f"the secured Kafka and Redis did not start: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield stack
    finally:
        stack.stop()


# The served API's tests (test_server_client, test_server_input, test_working_memory): a
# tenant of their own per test, its key, and the two clients that speak for it.


@pytest.fixture
def tenant() -> str:
    return new_tenant("acme")


@pytest.fixture
def key(env: dict[str, str], tenant: str) -> str:
    return tenant_key(env, tenant)


@pytest.fixture
async def client(server: str, key: str) -> AsyncIterator[MemoryAPIClient]:
    async with ams_client(server, key) as opened:
        yield opened


@pytest.fixture
def http(server: str, key: str) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as opened:
        yield opened
