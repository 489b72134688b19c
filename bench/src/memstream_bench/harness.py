"""A fresh namespace for one bench: its topics, an optional worker process, and its clean-up.

Each bench runs in a namespace of its own (`bench-<random>`) on the configured Kafka and
Redis, so it never meets real data or another bench, and it drops everything it created
afterwards: the search index, every key under the namespace and the namespace's topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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

__all__ = ["BenchNamespace", "chat_settings", "stub_chat"]


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
        self._worker_pid: int | None = None

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
        process = worker_process(self.deployment, log, probe, loglevel="warning")
        self._worker_pid = self._worker.enter_context(process).pid

    @property
    def worker_pid(self) -> int:
        """The process id of the worker `start_worker` started."""
        if self._worker_pid is None:
            raise MemstreamError("no worker is running: start_worker() first")
        return self._worker_pid

    def stop_worker(self) -> None:
        self._worker.close()
        self._worker_pid = None

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
def chat_settings(settings: Settings, stub_latency_s: float | None = None) -> Iterator[Settings]:
    """`settings` pointing at a chat model: a stub answering after `stub_latency_s` when one
    is given, else the configured one, else the local test model."""
    if stub_latency_s is not None:
        with stub_chat(stub_latency_s) as url:
            yield dataclasses.replace(settings, chat_base_url=url, chat_model="stub")
        return
    if settings.chat_base_url:
        yield settings
        return
    from memstream.providers.local_chat import local_chat_model

    with tempfile.TemporaryDirectory() as folder, local_chat_model(Path(folder)) as model:
        yield Settings.from_env({**settings.environ(), **model.settings()})


@contextlib.contextmanager
def stub_chat(latency_s: float) -> Iterator[str]:
    """An OpenAI-compatible chat API on this host that answers every extraction after
    `latency_s` with one fact, the turn's first words, using no CPU meanwhile: a hosted
    model's shape, so that what extraction costs memstream itself can be told apart from
    what a model on the same cores takes."""

    class Stub(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            said = body["messages"][-1]["content"].split("\n")[1:2] or ["the user said it"]
            fact = {"text": said[0][:120], "kind": "fact", "date": None, "topics": [],
                    "entities": [], "subject": "stub"}  # fmt: skip
            time.sleep(latency_s)
            answer = {
                "choices": [{"message": {"role": "assistant",
                                         "content": json.dumps({"memories": [fact]})}}],
                "usage": {"prompt_tokens": 400, "completion_tokens": 40},
            }  # fmt: skip
            raw = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
