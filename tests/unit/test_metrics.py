"""The metrics' shape without a network: notices counted with their labels, no tenant id in
any label, one registry per process, every metric documented, the Grafana dashboard asking
only for metrics memstream exports, and the last-error handler's choice of records."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from faust.types import TP
from prometheus_client.parser import text_string_to_metric_families

from memstream.errors import RedisUnavailableError
from memstream.health import Heartbeat, LastError
from memstream.memory.monitoring import (
    Consolidated,
    DeadLettered,
    Evicted,
    Forgotten,
    ModelUsage,
    MonitoringEvent,
    Skipped,
)
from memstream.memory.ports import LagSeries, ProcessReport
from memstream.metrics import Metrics
from memstream.streams.worker import _consumer_lag

ROOT = Path(__file__).resolve().parents[2]
TENANT = "acme-tenant-7f3e"
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def notices() -> list[MonitoringEvent]:
    return [
        Skipped(TENANT, "thread-1", "run-1", "record", "kafka_unavailable", "buffer full", NOW),
        Skipped(TENANT, "thread-1", "run-2", "recall", "redis_unavailable", "down", NOW),
        DeadLettered("ns.memory", 1, 7, "event_decode", f"bad event of {TENANT}", NOW),
        Evicted(TENANT, "e1", ("m1", "m2"), NOW),
        Forgotten(TENANT, "e2", ("m3",), NOW),
        Consolidated(TENANT, "e3", ("m4", "m5", "m6"), ("s1",), True, (), NOW),
        Consolidated(TENANT, "e4", ("m7", "m8"), (), False, ("m8",), NOW),
        ModelUsage(TENANT, "thread-1", "consolidation", 2, 100, 20, NOW),
    ]


class Collected:
    def __init__(self) -> None:
        self.events: list[MonitoringEvent] = []

    def announce(self, event: MonitoringEvent) -> None:
        self.events.append(event)


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def value(got: Samples, name: str, **labels: str) -> float:
    return got[(name, frozenset(labels.items()))]


def samples(metrics: Metrics) -> Samples:
    text = metrics.exposition().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_every_notice_is_counted_with_its_labels_and_handed_on() -> None:
    metrics = Metrics()
    inner = Collected()
    monitor = metrics.monitor(inner)
    for notice in notices():
        monitor.announce(notice)

    got = samples(metrics)
    assert inner.events == notices()
    assert (
        got[
            (
                "memstream_skipped_total",
                frozenset({"stage": "record", "code": "kafka_unavailable"}.items()),
            )
        ]
        == 1
    )
    assert (
        got[
            (
                "memstream_skipped_total",
                frozenset({"stage": "recall", "code": "redis_unavailable"}.items()),
            )
        ]
        == 1
    )
    assert value(got, "memstream_dead_letters_total", reason="event_decode") == 1
    assert value(got, "memstream_memories_evicted_total") == 2
    assert value(got, "memstream_memories_forgotten_total") == 1
    assert value(got, "memstream_memories_consolidated_total") == 3  # the skipped one: 0
    assert value(got, "memstream_consolidations_total", outcome="skipped") == 1
    assert value(got, "memstream_model_calls_total", purpose="consolidation") == 2
    tokens = value(got, "memstream_model_tokens_total", purpose="consolidation", direction="input")
    assert tokens == 100


def test_no_tenant_id_reaches_a_label_or_a_value() -> None:
    metrics = Metrics()
    monitor = metrics.monitor()
    for notice in notices():
        monitor.announce(notice)
    metrics.worker.observe_applied("TurnCompleted", datetime.now(UTC) - timedelta(seconds=1))
    metrics.worker.set_consumer_lag({("ns.memory", 0): 3})
    metrics.agent.observe_hook("after_agent", 0.0004)
    metrics.server.observe("GET", "/v1/long-term-memory/{memory_id}", 404, 0.002)

    text = metrics.exposition().decode()
    assert TENANT not in text
    labels = {
        (name, value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        for name, value in s.labels.items()
    }
    assert {name for name, _ in labels} <= {
        "stage", "code", "reason", "outcome", "purpose", "direction", "type", "topic",
        "partition", "hook", "method", "route", "status", "le",
    }  # fmt: skip
    assert ("type", "TurnCompleted") in labels and ("partition", "0") in labels


def test_the_projection_lag_counts_from_the_write_to_the_log() -> None:
    metrics = Metrics()
    metrics.worker.observe_applied("TurnCompleted", datetime.now(UTC) - timedelta(seconds=3))
    metrics.worker.observe_applied("MemoryForgotten", None)  # no timestamp: counted, not timed

    got = samples(metrics)
    assert value(got, "memstream_projection_lag_seconds_count") == 1
    assert 3 <= value(got, "memstream_projection_lag_seconds_sum") < 60
    assert value(got, "memstream_events_applied_total", type="MemoryForgotten") == 1


def test_partitions_no_longer_held_leave_the_consumer_lag() -> None:
    metrics = Metrics()
    metrics.worker.set_consumer_lag({("t", 0): 4, ("t", 1): 1})
    assert metrics.worker.total_lag == 5
    metrics.worker.set_consumer_lag({("t", 1): 0})

    lag = {k: v for k, v in samples(metrics).items() if k[0] == "memstream_consumer_lag"}
    assert lag == {
        ("memstream_consumer_lag", frozenset({"topic": "t", "partition": "1"}.items())): 0
    }
    assert metrics.worker.total_lag == 0


def test_each_process_keeps_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    for metrics in (first, second):  # the same names twice would collide in one registry
        _ = metrics.notices, metrics.worker, metrics.agent, metrics.server
    first.monitor().announce(notices()[3])

    assert value(samples(first), "memstream_memories_evicted_total") == 2
    assert value(samples(second), "memstream_memories_evicted_total") == 0


def exported() -> dict[str, set[str]]:
    """Every series name a worker, an agent process and a server can export -> its family."""
    metrics = Metrics()
    _ = metrics.notices, metrics.worker, metrics.agent, metrics.server, metrics.faust
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_count", "_sum", "_created"),
        "gauge": ("",),
    }
    names: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        for suffix in suffixes[family.type]:
            names[family.name + suffix] = {family.name}
    return names


def test_the_dashboard_asks_only_for_metrics_memstream_exports() -> None:
    dashboard = json.loads((ROOT / "infra" / "grafana" / "memstream.json").read_text())
    assert dashboard["schemaVersion"] >= 36 and dashboard["title"] == "memstream"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique for Grafana to import them"
    assert {i["pluginId"] for i in dashboard["__inputs"]} == {"prometheus"}
    names = exported()
    used = set()
    for panel in dashboard["panels"]:
        place = panel["gridPos"]
        assert place["x"] + place["w"] <= 24 and place["h"] > 0, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["type"] == "prometheus", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            expr = target["expr"]
            assert expr.count("(") == expr.count(")"), expr
            found = re.findall(r"\b(?:memstream|faust)_[a-z0-9_]+\b", expr)
            assert found, expr
            unknown = [name for name in found if name not in names]
            assert not unknown, f"{panel['title']!r} asks for {unknown}, which nothing exports"
            used |= set(found)
    # Every memstream metric is charted somewhere (a new one is drawn, or consciously not).
    charted = {family for name in used for family in names[name]}
    families = {family for fams in names.values() for family in fams}
    uncharted = {f for f in families if f.startswith("memstream_")} - charted
    assert uncharted <= {
        "memstream_consolidations",
        "memstream_model_calls",
        "memstream_model_tokens",
    }


def test_every_memstream_metric_is_documented() -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    families = {family for fams in exported().values() for family in fams}
    missing = sorted(
        f for f in families if f.startswith("memstream_") and f"`{f}" not in operations
    )
    assert not missing, f"docs/operations.md does not describe {missing}"


def test_the_last_error_keeps_our_warnings_and_everyones_errors_only() -> None:
    handler = LastError()
    ours = logging.getLogger("memstream.test.last_error")
    theirs = logging.getLogger("faust.test.last_error")
    for logger in (ours, theirs):
        logger.addHandler(handler)
        logger.propagate = False
    try:
        assert handler.last is None
        ours.warning("dead-lettered %s", "ns.memory/0@3")
        assert handler.last is not None
        assert handler.last[0] == "WARNING memstream.test.last_error: dead-lettered ns.memory/0@3"
        theirs.warning("Timer woke up too late")  # routine in a library: not an error
        assert "dead-lettered" in handler.last[0]
        theirs.error("Group Coordinator Request failed")
        assert handler.last[0] == "ERROR faust.test.last_error: Group Coordinator Request failed"
    finally:
        for logger in (ours, theirs):
            logger.removeHandler(handler)
            logger.propagate = True


class FakeConsumer:
    """Faust's consumer as the lag measurement reads it: assignment and high watermarks."""

    def __init__(self, ends: dict[TP, int | None], started: bool = True) -> None:
        self._ends = ends
        self._started = started

    def assignment(self) -> set[TP]:
        if not self._started:
            raise RuntimeError("consumer not started")
        return set(self._ends)

    def highwater(self, tp: TP) -> int | None:
        return self._ends[tp]


class FakeHealer:
    def __init__(self, consumed: dict[str, int | None]) -> None:
        self._consumed = consumed

    def last_consumed(self, field: str) -> int | None:
        return self._consumed.get(field, -1)


def test_the_consumer_lag_counts_what_is_after_the_last_message_consumed() -> None:
    consumer = FakeConsumer(
        {
            TP("ns.memory", 0): 10,  # consumed up to offset 6: 7, 8, 9 wait
            TP("ns.memory", 1): 4,  # nothing consumed, nothing committed: all four wait
            TP("ns.memory", 2): None,  # not fetched yet: unknown, left out
            TP("ns.memory", 3): 5,  # its committed offset not read yet: unknown, left out
            TP("ns.monitoring", 0): 99,  # another topic
        }
    )
    app = SimpleNamespace(consumer=consumer)
    healer = FakeHealer({"ns.memory/0": 6, "ns.memory/3": None})

    lag = _consumer_lag(app, "ns.memory", healer)  # type: ignore[arg-type]

    assert lag == {("ns.memory", 0): 3, ("ns.memory", 1): 4}
    stopped = SimpleNamespace(consumer=FakeConsumer({}, started=False))
    assert _consumer_lag(stopped, "ns.memory", healer) == {}  # type: ignore[arg-type]


class _Registry:
    """The `ProcessRegistry` port, in memory; `failing` makes every write unavailable."""

    def __init__(self) -> None:
        self.written: dict[tuple[str, int], tuple[ProcessReport, int]] = {}
        self.failing = False
        self.failed = 0

    def write(self, report: ProcessReport, ttl_s: int) -> None:
        if self.failing:
            self.failed += 1
            raise RedisUnavailableError("Redis did not answer")
        self.written[(report.host, report.pid)] = (report, ttl_s)

    def remove(self, host: str, pid: int) -> None:
        self.written.pop((host, pid), None)

    def reports(self) -> list[ProcessReport]:
        return [report for report, _ in self.written.values()]

    def lags(self) -> list[LagSeries]:
        return []


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_heartbeat_reports_its_kind_lag_and_last_error_then_leaves() -> None:
    registry = _Registry()
    errors = LastError()
    errors.emit(logging.LogRecord("memstream.x", logging.WARNING, "", 0, "slow", None, None))
    beat = Heartbeat(registry, "worker", errors=errors, lag=lambda: 7, metrics_port=9102)
    beat.start()
    try:
        _wait(lambda: bool(registry.written), "the first beat")
        ((report, ttl),) = registry.written.values()
    finally:
        beat.stop()
    assert (report.kind, report.lag, report.metrics_port, ttl) == ("worker", 7, 9102, 15)
    assert report.last_error == "WARNING memstream.x: slow" and report.last_error_at is not None
    assert registry.written == {}  # stopping removes it


def test_a_heartbeat_outlives_an_unavailable_backend(caplog: pytest.LogCaptureFixture) -> None:
    registry = _Registry()
    registry.failing = True
    beat = Heartbeat(registry, "server", errors=LastError(), interval_s=0.01).start()
    try:
        _wait(lambda: registry.failed >= 3, "beats against the unavailable backend")
        registry.failing = False
        _wait(lambda: bool(registry.written), "a beat once the backend answers")
    finally:
        beat.stop()
    warned = [r for r in caplog.records if "heartbeat" in r.getMessage()]
    assert len(warned) == 1  # once per outage, not every beat
    assert registry.written == {}
