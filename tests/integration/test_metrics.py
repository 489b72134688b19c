"""Metrics over real HTTP, parsed with prometheus_client's text parser, moving as events flow
through the real Kafka and Redis: the worker's (`memstream worker --metrics-port`), the agent
side's (its registry served by the host process), the server's (`/metrics`); and `memstream
status` showing a worker's lag and last error (its heartbeat in Redis)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memstream import Settings
from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.deployment import Deployment
from memstream.operations import drop, worker_process
from memstream.processes import free_port
from memstream.streams.background_publisher import BackgroundPublisher

from .helpers import DEADLINE_S, TestStack, shared_embedder, wait_until

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> tuple[str, Samples]:
    """The page at `url` and its samples, as Prometheus's own parser reads them."""
    response = httpx.get(url, timeout=5)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    return text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def labelled(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


class Metered:
    """A namespace of its own, with a worker serving its metrics."""

    def __init__(self, deployment: Deployment, worker: subprocess.Popen[bytes], url: str) -> None:
        self.deployment = deployment
        self.stack = TestStack(deployment.settings)
        self.worker = worker
        self.url = url


@pytest.fixture(scope="module")
def metered(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Metered]:
    # Its own namespace: the session's worker would share the partitions (and the counts).
    deployment = Deployment(settings, embedder=shared_embedder(settings)).with_namespace(
        f"{settings.namespace}-metrics"
    )
    port = free_port()
    probe = TestStack(deployment.settings).turn("__probe__", "is the worker up?", "yes")
    log = tmp_path_factory.mktemp("metered") / "worker.log"
    try:
        with worker_process(deployment, log, probe, metrics_port=port) as worker:
            yield Metered(deployment, worker, f"http://127.0.0.1:{port}/metrics")
    finally:
        deployment.close()
        drop(deployment)


def test_the_workers_metrics_move_as_events_are_applied_and_dead_lettered(
    metered: Metered,
) -> None:
    stack, url = metered.stack, metered.url
    _, before = scrape(url)
    tenant = f"metrics-tenant-{uuid.uuid4().hex[:8]}"
    events = [stack.turn(tenant, f"question {i}", f"answer {i}", turn=i) for i in range(5)]

    stack.publish(events)
    stack.wait_applied(events)

    def applied(samples: Samples) -> float:
        return value(samples, "memstream_events_applied_total", type="TurnCompleted")

    wait_until(lambda: applied(scrape(url)[1]) >= applied(before) + 5, "5 applied turns counted")
    text, after = scrape(url)
    lag_count = "memstream_projection_lag_seconds_count"
    assert value(after, lag_count) >= value(before, lag_count) + 5
    # An idle worker applies within seconds of the write (docs/operations.md: ~50 ms).
    new_lag = value(after, "memstream_projection_lag_seconds_sum") - value(
        before, "memstream_projection_lag_seconds_sum"
    )
    assert 0 < new_lag / 5 < 10
    for histogram in ("memstream_batch_size_count", "memstream_embedding_seconds_count"):
        assert value(after, histogram) > value(before, histogram), histogram
    received = "faust_messages_received_total"
    assert value(after, received) >= value(before, received) + 5  # Faust's own sensor
    assert tenant not in text

    # Measured once a second: both partitions of the memory topic, nothing left to project.
    caught_up = {
        frozenset({"topic": stack.topics.memory, "partition": p}.items()): 0.0 for p in "01"
    }
    wait_until(
        lambda: labelled(scrape(url)[1], "memstream_consumer_lag") == caught_up,
        "the consumer lag of both partitions at 0",
    )

    dead = "memstream_dead_letters_total"
    stack.publish_raw(tenant.encode(), b"{not an event")
    wait_until(
        lambda: (
            value(scrape(url)[1], dead, reason="event_decode")
            == value(before, dead, reason="event_decode") + 1
        ),
        "the dead letter counted under its reason",
    )


def status(deployment: Deployment) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "memstream", "status"],
        env={**os.environ, **deployment.settings.environ()},
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_status_shows_the_workers_lag_and_last_error(metered: Metered) -> None:
    deployment, stack = metered.deployment, metered.stack
    pid = metered.worker.pid

    def line() -> str:
        lines = [row for row in status(deployment).splitlines() if f"(pid {pid} " in row]
        return lines[0] if lines else ""

    wait_until(lambda: "lag 0 messages" in line(), "status to show the worker's lag")
    port = metered.url.split(":")[2].split("/")[0]
    assert f"metrics :{port}" in line()

    tenant = f"status-{uuid.uuid4().hex[:8]}"
    stack.publish_raw(tenant.encode(), b"{not an event either")
    wait_until(lambda: "dead-lettered" in line(), "status to show the dead letter as last error")
    shown = line()
    assert shown.startswith(f"worker (pid {pid} on ")
    assert "last error at " in shown and "not a JSON event" in shown


def test_the_agent_sides_metrics_move_as_turns_are_recorded_or_skipped(
    metered: Metered, tmp_path: Path
) -> None:
    deployment = metered.deployment
    port = free_port()
    stop = deployment.metrics.serve(port)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        _, before = scrape(url)
        tenant = f"agent-tenant-{uuid.uuid4().hex[:8]}"
        agent = Agent(
            ScriptedModel(["Noted.", "Noted too.", "Still noted."]),
            middleware=[deployment.memory_middleware(ScriptedModel([]))],
        )
        for text in ("I like tea.", "My cat is Tom.", "I live in Oslo."):
            assert agent.run(text, RunConfig("thread-1", tenant)).status == "completed"
        assert deployment.flush(30)  # recorded, then sent

        text, after = scrape(url)
        acknowledged = "memstream_messages_acknowledged_total"
        assert value(after, acknowledged) >= value(before, acknowledged) + 3
        for hook in ("before_agent", "after_agent"):
            count = value(after, "memstream_hook_seconds_count", hook=hook)
            assert count == value(before, "memstream_hook_seconds_count", hook=hook) + 3
        assert value(after, "memstream_publish_buffer_capacity") == 10_000
        assert value(after, "memstream_publish_buffer_messages") == 0  # all flushed
        assert tenant not in text
    finally:
        stop()

    # A full buffer (capacity 0 here) makes the turn skip recording: counted by stage and code.
    full = Deployment(deployment.settings, embedder=shared_embedder(deployment.settings))
    try:
        full.stores(publisher=BackgroundPublisher(full.kafka, capacity=0))
        agent = Agent(
            ScriptedModel(["Noted."]), middleware=[full.memory_middleware(ScriptedModel([]))]
        )
        assert (
            agent.run("I like coffee.", RunConfig("thread-1", "agent-full")).status == "completed"
        )
        assert full.flush(30)  # the recorder's thread has met the full buffer
        _, skipped = scrape_registry(full)
        assert (
            value(skipped, "memstream_skipped_total", stage="record", code="kafka_unavailable") == 1
        )
    finally:
        full.close(0)


def scrape_registry(deployment: Deployment) -> tuple[str, Samples]:
    port = free_port()
    stop = deployment.metrics.serve(port)
    try:
        return scrape(f"http://127.0.0.1:{port}/metrics")
    finally:
        stop()


def test_the_servers_metrics_count_requests_by_route_template_without_tenants(
    server: str, settings: Settings
) -> None:
    url = f"{server}/metrics"
    _, before = scrape(url)
    tenant = f"server-tenant-{uuid.uuid4().hex[:8]}"
    for _ in range(2):
        assert httpx.get(f"{server}/v1/health", timeout=5).status_code == 200
    missing = httpx.get(
        f"{server}/v1/long-term-memory/01JZ0000000000000000000000",
        params={"namespace": tenant},
        timeout=5,
    )
    assert httpx.get(f"{server}/no/such/route", timeout=5).status_code == 404

    text, after = scrape(url)
    requests = "memstream_http_requests_total"
    health = {"method": "GET", "route": "/v1/health", "status": "200"}
    assert value(after, requests, **health) == value(before, requests, **health) + 2
    one = {
        "method": "GET",
        "route": "/v1/long-term-memory/{memory_id}",
        "status": str(missing.status_code),
    }
    assert value(after, requests, **one) == value(before, requests, **one) + 1
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    assert value(after, requests, **unmatched) == value(before, requests, **unmatched) + 1
    latency = "memstream_http_request_seconds_count"
    assert value(after, latency, method="GET", route="/v1/health") >= 2
    assert tenant not in text and "01JZ0000000000000000000000" not in text

    # Its heartbeat puts it in `memstream status`, with its last error (none so far).
    shown = status(Deployment(settings))
    assert any(
        row.startswith("server (pid ") and "last error" in row for row in shown.splitlines()
    ), shown
