"""What is done with a deployment, as opposed to how it is wired (`memstream.deployment`):
erase a tenant, drop a namespace, run a worker in this process or start one as a child,
re-drive dead letters, beat for `memstream status`, and measure the projection's lag (per
shard too).

The CLI, the benches and the tests call these; each takes the `Deployment` whose parts it
uses and reaches the projection only through its ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from memstream.deployment import Deployment
from memstream.errors import ProjectionLagError
from memstream.health import Heartbeat, LastError
from memstream.memory.events import MemoryEvent, TenantErased
from memstream.memory.monitoring import Monitor
from memstream.memory.ports import ShardReport
from memstream.memory.tenancy import validate_tenant
from memstream.processes import running
from memstream.streams.dead_letters import DeadLetterRetry
from memstream.streams.projector import DeadLetters, Projector, ShardProjectors
from memstream.streams.topics import end_offsets

__all__ = [
    "Erasure",
    "ShardState",
    "dead_letter_retry",
    "drop",
    "erase_tenant",
    "heartbeat",
    "projection_lag",
    "run_worker",
    "shard_states",
    "worker_process",
]

_WORKER_READY_S = 90.0


@dataclass(frozen=True, slots=True)
class Erasure:
    """What erasing a tenant did: its event, the data keys destroyed, the Redis files
    rewritten, and whether the log was sealed at all (False: encryption was never set up, so
    the log's plaintext was not reached)."""

    event: TenantErased
    destroyed: tuple[str, ...]
    rewritten: tuple[str, ...]
    sealed: bool


def erase_tenant(deployment: Deployment, tenant: str, *, timeout_s: float = 120.0) -> Erasure:
    """Crypto-shred `tenant` (`memstream forget --tenant T --erase`, docs/erasure.md):
    destroy its data keys (tombstones in the keys topic, gone from disk once compacted),
    write a TenantErased event, wait until the live projection has deleted the tenant's
    memories, then rewrite Redis's files so their plaintext copy is gone from its disk.
    Idempotent: running it again destroys what keys the tenant has since made."""
    validate_tenant(tenant)
    keyring = deployment.keyring()
    destroyed = keyring.erase(tenant) if keyring is not None else []
    event = TenantErased(
        tenant=tenant,
        request_id=uuid.uuid4().hex,
        requested_at=datetime.now(UTC),
        key_ids=tuple(destroyed),
    )

    async def publish() -> None:
        await deployment.ensure_topics()
        # TenantErased has no sealed fields: it names no content and stays readable.
        async with deployment.event_publisher() as publisher:
            await publisher.publish([event])

    asyncio.run(publish())
    if deployment.status().wait_applied([event], timeout_s):
        raise ProjectionLagError(
            f"the erasure of tenant {tenant!r} is in the log (its keys are destroyed) but no "
            f"worker applied it within {timeout_s:.0f}s, so Redis's files were not rewritten; "
            "start a worker (`memstream worker`) and run the erasure again"
        )
    rewritten = deployment.projection.rewrite_files(timeout_s, tenant)
    return Erasure(event, tuple(destroyed), tuple(rewritten), sealed=keyring is not None)


def drop(deployment: Deployment) -> None:
    """Delete everything of the deployment's namespace: every generation's index and keys,
    and its topics. For tests and benches; irreversible."""
    deployment.projection.drop()
    with contextlib.suppress(KafkaError):  # the keys are gone; a topic left is harmless
        asyncio.run(_delete_topics(deployment))


async def _delete_topics(deployment: Deployment) -> None:
    admin = AIOKafkaAdminClient(**deployment.kafka.aiokafka())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        names = [spec.name for spec in deployment.topics.specs() if spec.name in existing]
        if names:
            await admin.delete_topics(names)
    finally:
        await admin.close()


def heartbeat(
    deployment: Deployment,
    kind: str,
    errors: LastError,
    *,
    lag: Callable[[], int | None] = lambda: None,
    metrics_port: int = 0,
) -> Heartbeat:
    """This process's heartbeat under the namespace (its kind, lag, last error and metrics
    port), for `memstream status`; start it, and stop it on the way out."""
    return Heartbeat(
        deployment.projection.processes(),
        kind,
        errors=errors,
        lag=lag,
        metrics_port=metrics_port or None,
    )


def run_worker(
    deployment: Deployment, *, loglevel: str = "info", metrics_port: int | None = None
) -> None:
    """Create the topics if needed, then run the worker until SIGINT or SIGTERM: its metrics
    served on `metrics_port` (default MEMSTREAM_WORKER_METRICS_PORT; 0: not served), its lag
    and last error kept for `memstream status` (a heartbeat)."""
    from memstream.streams.worker import run_app

    port = deployment.settings.worker_metrics_port if metrics_port is None else metrics_port
    deployment.check_embedder()
    asyncio.run(deployment.ensure_topics())
    app = deployment.worker_app()
    host = deployment.settings.worker_metrics_host
    stop_serving = deployment.metrics.serve(port, host) if port else None
    errors = LastError()
    lag = deployment.metrics.worker
    beat = heartbeat(deployment, "worker", errors, lag=lambda: lag.total_lag, metrics_port=port)
    beat.start()
    try:
        run_app(app, loglevel=loglevel, loghandlers=[errors])
    finally:
        beat.stop()
        if stop_serving is not None:
            stop_serving()


def worker_process(
    deployment: Deployment,
    log: Path,
    probe: MemoryEvent,
    *,
    loglevel: str = "info",
    metrics_port: int = 0,
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """A `memstream worker` process on the deployment's namespace, projecting (it has
    applied `probe`) when the block starts and stopped when it ends (serving its metrics on
    `metrics_port` when given; with 0 none, whatever MEMSTREAM_WORKER_METRICS_PORT says, as
    several such workers run at once). Tests and benches use it."""

    async def publish() -> None:
        await deployment.ensure_topics()  # a fresh namespace has none until a worker starts
        async with deployment.event_publisher() as publisher:
            await publisher.publish([probe])

    asyncio.run(publish())
    status = deployment.status()
    return running(
        [
            sys.executable,
            "-m",
            "memstream",
            "worker",
            "--loglevel",
            loglevel,
            "--metrics-port",
            str(metrics_port),
        ],
        env={**os.environ, **deployment.settings.environ()},
        log=log,
        ready=lambda: not status.unapplied([probe]),
        what=f"the worker of namespace {deployment.settings.namespace}",
        timeout_s=_WORKER_READY_S,
    )


def projection_lag(deployment: Deployment) -> dict[int, int]:
    """Per partition of the memory topic: messages the live projection has not applied."""
    topic = deployment.topics.memory
    positions = deployment.status().positions()
    ends = asyncio.run(end_offsets(deployment.kafka, topic))
    return {p: _lag(end, positions, f"{topic}/{p}") for p, end in ends.items()}


@dataclass(frozen=True, slots=True)
class ShardState:
    """A projection shard (`report`), its partitions and their lag: messages its live
    generation has not applied (None while the shard does not answer)."""

    report: ShardReport
    partitions: tuple[int, ...]
    lag: int | None


def shard_states(deployment: Deployment) -> list[ShardState]:
    """Every shard of the projection, reachable or not, with the lag of its partitions
    (`memstream stats`, `memstream status`)."""
    topic = deployment.topics.memory
    ends = asyncio.run(end_offsets(deployment.kafka, topic))
    of_partition = deployment.projection.layout.of_partition
    states = []
    for report in deployment.projection.shard_reports():
        own = tuple(p for p in sorted(ends) if of_partition(p) == report.shard)
        lag = (
            sum(_lag(ends[p], report.positions, f"{topic}/{p}") for p in own)
            if report.reachable
            else None
        )
        states.append(ShardState(report, own, lag))
    return states


def _lag(end: int, positions: Mapping[str, int], field: str) -> int:
    return max(end - positions.get(field, -1) - 1, 0)


@asynccontextmanager
async def dead_letter_retry(deployment: Deployment) -> AsyncIterator[DeadLetterRetry]:
    """Re-drives dead letters into the live projection with the worker's parts, each to the
    shard of its partition (`memstream dead-letters retry`)."""
    projection = deployment.projection
    async with contextlib.AsyncExitStack() as sessions:
        parts = [
            await sessions.enter_async_context(projection.session(shard))
            for shard in range(len(projection.shards))
        ]

        def projector(dead_letters: DeadLetters, monitor: Monitor) -> ShardProjectors:
            return ShardProjectors(
                [
                    Projector(
                        deployment.embedders,
                        session.writer,
                        session.generations,
                        dead_letters,
                        default_importance=deployment.settings.default_importance,
                        monitor=monitor,
                        keyring=deployment.keyring(),
                    )
                    for session in parts
                ],
                projection.layout.of_partition,
            )

        counted = deployment.metrics.monitor()
        async with DeadLetterRetry(
            deployment.kafka, deployment.topics, projector, counted=counted
        ) as retry:
            yield retry
