"""A fresh namespace for one bench: its topics, an optional worker process, and its clean-up.

Each bench runs in a namespace of its own (`bench-<random>`) on the configured Kafka and
Redis, so it never meets real data or another bench, and it drops everything it created
afterwards: the search index, every key under the namespace and the namespace's topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import MemstreamError
from memstream.memory.embeddings import Embedder
from memstream.memory.events import MemoryEvent
from memstream.operations import drop, worker_process
from memstream.projections.backend import RedisProjection
from memstream.projections.status import ProjectionStatus

__all__ = ["BenchNamespace"]


class BenchNamespace:
    """Context manager: a fresh namespace (topics created), dropped again on exit."""

    def __init__(self, settings: Settings, label: str, embedder: Embedder | None = None) -> None:
        namespace = f"bench-{label}-{uuid.uuid4().hex[:8]}"
        self.deployment = Deployment(
            dataclasses.replace(settings, namespace=namespace), embedder=embedder
        )
        self.settings = self.deployment.settings
        # A bench measures the Redis projection against raw Redis: it reads Redis directly,
        # through a projection of its own (no client leaves a deployment's backend).
        self.projection = RedisProjection(self.settings, self.deployment.partition_of)
        self.keys = self.projection.keys
        self.topics = self.deployment.topics
        self.kafka = self.deployment.kafka
        self.redis = self.projection.client
        self.status = ProjectionStatus(self.redis, self.keys, url=self.settings.redis)
        self._scratch: list[str] = [f"{namespace}-raw"]
        self._worker = contextlib.ExitStack()

    def __enter__(self) -> BenchNamespace:
        asyncio.run(self.deployment.ensure_topics())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_worker()
        self.deployment.close()
        for namespace in [self.settings.namespace, *self._scratch]:
            drop(self.deployment.with_namespace(namespace))

    def scratch(self, label: str) -> str:
        """A further namespace (keys and index only) that is dropped with this one."""
        name = f"{self.settings.namespace}-{label}"
        self._scratch.append(name)
        return name

    # -- the worker ----------------------------------------------------------------------

    def start_worker(self, probe: MemoryEvent) -> None:
        """Start `memstream worker` on this namespace; return once it has projected `probe`."""
        log = Path(tempfile.mkstemp(prefix=f"{self.settings.namespace}-", suffix=".log")[1])
        self._worker.callback(log.unlink, missing_ok=True)
        self._worker.enter_context(worker_process(self.deployment, log, probe, loglevel="warning"))

    def stop_worker(self) -> None:
        self._worker.close()

    # -- the log -------------------------------------------------------------------------

    def publish(self, events: Sequence[MemoryEvent]) -> None:
        asyncio.run(self.publish_async(events))

    async def publish_async(self, events: Sequence[MemoryEvent], batch: int = 500) -> None:
        async with self.deployment.event_publisher() as publisher:
            for start in range(0, len(events), batch):
                await publisher.publish(events[start : start + batch])

    def wait_applied(
        self,
        events: Sequence[MemoryEvent],
        timeout_s: float,
        tick: Callable[[int, int], None] | None = None,
    ) -> None:
        """Wait until every event is applied (each tenant's last one is polled)."""
        pending = self.status.wait_applied(events, timeout_s, tick)
        if pending:
            raise MemstreamError(
                f"{len(pending)} tenants' events were not projected within {timeout_s:.0f}s"
            )


@contextlib.contextmanager
def chat_settings(settings: Settings) -> Iterator[Settings]:
    """`settings` pointing at a chat model: the configured one, or the local test model."""
    if settings.chat_base_url:
        yield settings
        return
    from memstream.providers.local_chat import local_chat_model

    with tempfile.TemporaryDirectory() as folder, local_chat_model(Path(folder)) as model:
        yield Settings.from_env({**settings.environ(), **model.settings()})
