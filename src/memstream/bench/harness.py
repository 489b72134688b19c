"""A fresh namespace for one bench: its topics, an optional worker process, and its clean-up.

Each bench runs in a namespace of its own (`bench-<random>`) on the configured Kafka and
Redis, so it never meets real data or another bench, and it drops everything it created
afterwards: the search index, every key under the namespace and the namespace's topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

import redis
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from memstream.config import Settings
from memstream.errors import MemstreamError
from memstream.memory.events import MemoryEvent
from memstream.projections.connection import redis_client
from memstream.projections.schema import Keyspace
from memstream.projections.status import ProjectionStatus
from memstream.streams.publisher import EventPublisher
from memstream.streams.topics import Topics, ensure_topics

__all__ = ["BenchNamespace", "drop_namespace"]

_WORKER_READY_S = 90.0


class BenchNamespace:
    """Context manager: a fresh namespace (topics created), dropped again on exit."""

    def __init__(self, settings: Settings, label: str) -> None:
        namespace = f"bench-{label}-{uuid.uuid4().hex[:8]}"
        self.settings = dataclasses.replace(settings, namespace=namespace)
        self.keys = Keyspace(namespace)
        self.topics = Topics(namespace, self.settings.partitions)
        self.redis = redis_client(self.settings.redis)
        self.status = ProjectionStatus(self.redis, self.keys, url=self.settings.redis)
        self._scratch: list[str] = [f"{namespace}-raw"]
        self._worker: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    def __enter__(self) -> BenchNamespace:
        asyncio.run(ensure_topics(self.settings.bootstrap_servers, self.topics))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_worker()
        drop_namespace(self.settings, extra_namespaces=self._scratch)

    def scratch(self, label: str) -> str:
        """A further namespace (keys and index only) that is dropped with this one."""
        name = f"{self.settings.namespace}-{label}"
        self._scratch.append(name)
        return name

    # -- the worker ----------------------------------------------------------------------

    def start_worker(self, probe: MemoryEvent) -> None:
        """Start `memstream worker` on this namespace; return once it has projected `probe`."""
        env = {**os.environ, "MEMSTREAM_NAMESPACE": self.settings.namespace}
        handle, name = tempfile.mkstemp(prefix=f"{self.settings.namespace}-", suffix=".log")
        self._log = Path(name)
        with os.fdopen(handle, "wb") as log:
            self._worker = subprocess.Popen(
                [sys.executable, "-m", "memstream", "worker", "--loglevel", "warning"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.publish([probe])
        deadline = time.monotonic() + _WORKER_READY_S
        while self.status.unapplied([probe]):
            if self._worker.poll() is not None or time.monotonic() > deadline:
                tail = self._log.read_text(errors="replace")[-2000:]
                self.stop_worker()
                raise MemstreamError(f"the bench's worker did not start projecting:\n{tail}")
            time.sleep(0.05)

    def stop_worker(self) -> None:
        if self._worker is None:
            return
        self._worker.terminate()
        try:
            self._worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._worker.kill()
            self._worker.wait()
        self._worker = None
        if self._log is not None:
            self._log.unlink(missing_ok=True)

    # -- the log -------------------------------------------------------------------------

    def publish(self, events: Sequence[MemoryEvent]) -> None:
        asyncio.run(self.publish_async(events))

    async def publish_async(self, events: Sequence[MemoryEvent], batch: int = 500) -> None:
        async with EventPublisher(self.settings.bootstrap_servers, self.topics) as publisher:
            for start in range(0, len(events), batch):
                await publisher.publish(events[start : start + batch])

    def wait_applied(
        self,
        events: Sequence[MemoryEvent],
        timeout_s: float,
        tick: Callable[[int, int], None] | None = None,
    ) -> None:
        """Wait until every event is applied; poll only each tenant's last event (per-tenant
        order: when it is applied, so are those before it)."""
        last = {event.tenant: event for event in events}
        pending = list(last.values())
        deadline = time.monotonic() + timeout_s
        while pending:
            pending = self.status.unapplied(pending)
            if tick is not None:
                tick(len(last) - len(pending), len(last))
            if not pending:
                return
            if time.monotonic() > deadline:
                raise MemstreamError(
                    f"{len(pending)} tenants' events were not projected within {timeout_s:.0f}s"
                )
            time.sleep(0.02)


def drop_namespace(settings: Settings, extra_namespaces: Sequence[str] = ()) -> None:
    """Drop the namespace's index, keys and topics (and the keys/indexes of `extra_namespaces`)."""
    client = redis_client(settings.redis)
    for namespace in (settings.namespace, *extra_namespaces):
        keys = Keyspace(namespace)
        with contextlib.suppress(redis.ResponseError):  # the index may never have been created
            client.ft(keys.index_name).dropindex(delete_documents=False)
        batch = []
        for key in client.scan_iter(match=f"{namespace}:*", count=5000):
            batch.append(key)
            if len(batch) >= 5000:
                client.unlink(*batch)
                batch.clear()
        if batch:
            client.unlink(*batch)

    async def delete_topics() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
        await admin.start()
        try:
            existing = set(await admin.list_topics())
            names = [s.name for s in Topics(settings.namespace).specs() if s.name in existing]
            if names:
                await admin.delete_topics(names)
        finally:
            await admin.close()

    with contextlib.suppress(KafkaError):  # the keys are gone; a topic left behind is harmless
        asyncio.run(delete_topics())
