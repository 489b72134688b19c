"""Metrics: what each memstream process exports in Prometheus's text format.

Each process keeps its own registry (`Metrics`, one per `Deployment`), never
prometheus_client's global one, so tests and an application that runs the agent side and a
server in one process keep their numbers apart. Instruments are grouped by the part that moves
them, and each group is registered on first use, so a worker exports the worker's metrics and
an agent process the agent side's:

    notices   every monitoring notice, counted by `CountingMonitor` (the `Monitor` port's
              Prometheus adapter): Skipped by stage, dead letters by reason, memories evicted,
              forgotten and consolidated, model calls made outside turns
    worker    events applied by type, end-to-end projection lag, embedding time, batch size,
              consumer lag per partition (and Faust's own sensors, `faust_*`)
    agent     publish buffer fill, messages acknowledged by the broker, hook time
    server    HTTP requests by route and status, and their latency

No label carries a tenant id or anything else a caller chooses: label values are event type
names, error codes, stages, hook names, route templates, topics and partitions. Every metric
is listed in docs/operations.md, and infra/grafana/memstream.json charts them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector

from memstream.memory.embeddings import Embedder, Embedders, Vectors

if TYPE_CHECKING:
    from faust.sensors.prometheus import FaustMetrics
from memstream.memory.monitoring import (
    Consolidated,
    DeadLettered,
    DeadLetterRetried,
    Evicted,
    Forgotten,
    ModelUsage,
    Monitor,
    MonitoringEvent,
    Skipped,
)

__all__ = [
    "AgentMetrics",
    "CountingMonitor",
    "Metrics",
    "NoticeMetrics",
    "PublishBuffer",
    "ServerMetrics",
    "TimedEmbedder",
    "WorkerMetrics",
]

# Seconds from an event's write to its apply: tens of milliseconds on an idle worker, minutes
# behind a backlog or a worker that was down.
_LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
_EMBED_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# A hook adds well under a millisecond to a turn (docs/benchmarks.md); recall searches Redis.
_HOOK_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5)
_HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class NoticeMetrics:
    """Monitoring notices, counted (what `memstream tail` shows one by one)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.skipped = Counter(
            "memstream_skipped",
            "Steps of turns memory skipped (the turn went on), by stage and error code.",
            ["stage", "code"],
            registry=registry,
        )
        self.dead_letters = Counter(
            "memstream_dead_letters",
            "Messages of the memory topic sent to the dead-letter topic, by the codec's "
            "error code.",
            ["reason"],
            registry=registry,
        )
        self.dead_letters_retried = Counter(
            "memstream_dead_letters_retried",
            "Dead letters `memstream dead-letters retry` re-drove, by outcome (applied, "
            "already_applied, failed, erased).",
            ["outcome"],
            registry=registry,
        )
        self.evicted = Counter(
            "memstream_memories_evicted",
            "Memories evicted because a tenant went past its bound.",
            registry=registry,
        )
        self.forgotten = Counter(
            "memstream_memories_forgotten",
            "Stored memories deleted by applied forget requests.",
            registry=registry,
        )
        self.consolidated = Counter(
            "memstream_memories_consolidated",
            "Memories replaced by summaries (applied consolidations).",
            registry=registry,
        )
        self.consolidations = Counter(
            "memstream_consolidations",
            "Consolidations applied, or skipped whole because members were gone.",
            ["outcome"],
            registry=registry,
        )
        self.model_calls = Counter(
            "memstream_model_calls",
            "Model calls memory made outside turns, by purpose.",
            ["purpose"],
            registry=registry,
        )
        self.model_tokens = Counter(
            "memstream_model_tokens",
            "Tokens of those model calls, by purpose and direction (input, output).",
            ["purpose", "direction"],
            registry=registry,
        )

    def count(self, event: MonitoringEvent) -> None:
        if isinstance(event, Skipped):
            self.skipped.labels(stage=event.stage, code=event.code).inc()
        elif isinstance(event, DeadLettered):
            self.dead_letters.labels(reason=event.code).inc()
        elif isinstance(event, DeadLetterRetried):
            self.dead_letters_retried.labels(outcome=event.outcome).inc()
        elif isinstance(event, Evicted):
            self.evicted.inc(len(event.memory_ids))
        elif isinstance(event, Forgotten):
            self.forgotten.inc(len(event.memory_ids))
        elif isinstance(event, Consolidated):
            self.consolidations.labels(outcome="applied" if event.applied else "skipped").inc()
            if event.applied:
                self.consolidated.inc(len(event.replaced))
        elif isinstance(event, ModelUsage):
            self.model_calls.labels(purpose=event.purpose).inc(event.calls)
            self.model_tokens.labels(purpose=event.purpose, direction="input").inc(
                event.input_tokens
            )
            self.model_tokens.labels(purpose=event.purpose, direction="output").inc(
                event.output_tokens
            )


class CountingMonitor:
    """The Monitor port's Prometheus adapter: counts each notice, then hands it on to
    `inner` (the Kafka monitor) when there is one. Never raises, as the port requires."""

    def __init__(self, notices: NoticeMetrics, inner: Monitor | None = None) -> None:
        self._notices = notices
        self._inner = inner

    def announce(self, event: MonitoringEvent) -> None:
        try:
            self._notices.count(event)
        finally:
            if self._inner is not None:
                self._inner.announce(event)


class WorkerMetrics:
    """What the projection worker did."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.applied = Counter(
            "memstream_events_applied",
            "Events applied to the projection for the first time, by event type.",
            ["type"],
            registry=registry,
        )
        self.projection_lag = Histogram(
            "memstream_projection_lag_seconds",
            "Seconds from an event's write to the log (its Kafka timestamp) to its apply.",
            buckets=_LAG_BUCKETS,
            registry=registry,
        )
        self.embedding = Histogram(
            "memstream_embedding_seconds",
            "Seconds one call of the embedder took (one call embeds a batch's memories).",
            buckets=_EMBED_BUCKETS,
            registry=registry,
        )
        self.batch_size = Histogram(
            "memstream_batch_size",
            "Messages the worker projected in one batch.",
            buckets=_BATCH_BUCKETS,
            registry=registry,
        )
        self.consumer_lag = Gauge(
            "memstream_consumer_lag",
            "Messages of a partition this worker holds that it has not projected yet.",
            ["topic", "partition"],
            registry=registry,
        )
        self._lag: dict[tuple[str, int], int] = {}

    def observe_applied(self, event_type: str, written_at: datetime | None) -> None:
        """An event of `event_type`, written to the log at `written_at`, was applied now."""
        self.applied.labels(type=event_type).inc()
        if written_at is not None:
            lag = (datetime.now(UTC) - written_at).total_seconds()
            self.projection_lag.observe(max(lag, 0.0))

    def set_consumer_lag(self, lag: Mapping[tuple[str, int], int]) -> None:
        """The lag of every partition held now; partitions no longer held are dropped."""
        for topic, partition in set(self._lag) - set(lag):
            self.consumer_lag.remove(topic, str(partition))
        for (topic, partition), messages in lag.items():
            self.consumer_lag.labels(topic=topic, partition=str(partition)).set(messages)
        self._lag = dict(lag)

    @property
    def total_lag(self) -> int | None:
        """The consumer lag summed over the partitions held; None before it is measured."""
        return sum(self._lag.values()) if self._lag else None


class TimedEmbedder:
    """An embedder whose document calls are timed into `memstream_embedding_seconds`."""

    def __init__(self, embedder: Embedder, histogram: Histogram) -> None:
        self._embedder = embedder
        self._histogram = histogram

    @property
    def model_id(self) -> str:
        return self._embedder.model_id

    @property
    def dims(self) -> int:
        return self._embedder.dims

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        with self._histogram.time():
            return self._embedder.embed_documents(texts)

    def embed_query(self, text: str) -> Vectors:
        return self._embedder.embed_query(text)


class TimedEmbedders:
    """`Embedders` whose embedders' document calls are timed into `memstream_embedding_seconds`
    (the worker's: whichever model the generation it writes was built with)."""

    def __init__(self, embedders: Embedders, histogram: Histogram) -> None:
        self._embedders = embedders
        self._histogram = histogram

    @property
    def configured_model(self) -> str:
        return self._embedders.configured_model

    def configured(self) -> Embedder:
        return TimedEmbedder(self._embedders.configured(), self._histogram)

    def for_model(self, model_id: str) -> Embedder:
        return TimedEmbedder(self._embedders.for_model(model_id), self._histogram)


class PublishBuffer(Protocol):
    """What the agent side's publisher tells about its buffer (streams.background_publisher)."""

    @property
    def pending(self) -> int: ...

    @property
    def capacity(self) -> int: ...

    @property
    def acknowledged(self) -> int: ...


class _BufferCollector(Collector):
    """Reads the publisher's own counts at scrape time: nothing on the publish path."""

    def __init__(self) -> None:
        self.buffers: list[PublishBuffer] = []

    def collect(self) -> Iterable[Metric]:
        fill = GaugeMetricFamily(
            "memstream_publish_buffer_messages",
            "Messages waiting in the agent side's publish buffer for the broker.",
        )
        fill.add_metric([], sum(b.pending for b in self.buffers))
        capacity = GaugeMetricFamily(
            "memstream_publish_buffer_capacity",
            "Messages the publish buffer holds before turns skip recording.",
        )
        capacity.add_metric([], sum(b.capacity for b in self.buffers))
        acknowledged = CounterMetricFamily(
            "memstream_messages_acknowledged",
            "Messages the broker acknowledged to the agent side's publisher.",
        )
        acknowledged.add_metric([], sum(b.acknowledged for b in self.buffers))
        return [fill, capacity, acknowledged]


class AgentMetrics:
    """The agent side: its publish buffer and its hooks."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._buffers = _BufferCollector()
        registry.register(self._buffers)
        self.hook = Histogram(
            "memstream_hook_seconds",
            "Seconds the memory middleware's hooks took (before_agent recalls, after_agent "
            "records).",
            ["hook"],
            buckets=_HOOK_BUCKETS,
            registry=registry,
        )

    def watch(self, buffer: PublishBuffer) -> None:
        """Export `buffer`'s fill and acknowledgements."""
        self._buffers.buffers.append(buffer)

    def observe_hook(self, hook: str, seconds: float) -> None:
        self.hook.labels(hook=hook).observe(seconds)


class ServerMetrics:
    """The HTTP API: requests by route template (never the path: it holds memory ids)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "memstream_http_requests",
            "HTTP requests answered, by method, route template and status code.",
            ["method", "route", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "memstream_http_request_seconds",
            "Seconds from a request's arrival to its answer, by method and route template.",
            ["method", "route"],
            buckets=_HTTP_BUCKETS,
            registry=registry,
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method=method, route=route, status=str(status)).inc()
        self.latency.labels(method=method, route=route).observe(seconds)


class Metrics:
    """One process's registry and its instrument groups, each registered on first use."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()

    @cached_property
    def notices(self) -> NoticeMetrics:
        return NoticeMetrics(self.registry)

    @cached_property
    def worker(self) -> WorkerMetrics:
        return WorkerMetrics(self.registry)

    @cached_property
    def agent(self) -> AgentMetrics:
        return AgentMetrics(self.registry)

    @cached_property
    def server(self) -> ServerMetrics:
        return ServerMetrics(self.registry)

    @cached_property
    def faust(self) -> FaustMetrics:
        """Faust's sensors' instruments, under the fixed prefix `faust_` (Faust's default
        prefix is the app's name, which holds the namespace: a dashboard must not depend on
        it). The worker's app reports into them through Faust's PrometheusMonitor."""
        from faust.sensors.prometheus import FaustMetrics

        return FaustMetrics.create(self.registry, "faust")

    def monitor(self, inner: Monitor | None = None) -> CountingMonitor:
        """A Monitor that counts notices into this registry, then hands them to `inner`."""
        return CountingMonitor(self.notices, inner)

    def exposition(self) -> bytes:
        """Everything in the registry, in Prometheus's text format."""
        return generate_latest(self.registry)

    def serve(self, port: int, host: str = "127.0.0.1") -> Callable[[], None]:
        """Serve the registry at http://host:port/metrics from a daemon thread; returns a
        function that stops it."""
        server, thread = start_http_server(port, addr=host, registry=self.registry)

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(5.0)

        return stop
