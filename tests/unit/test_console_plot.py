"""The console's lag plot (server/console.py `_plot`): where each report lands in the SVG."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memstream.memory.ports import LagSeries
from memstream.server.console import _plot

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)


def test_an_hour_of_lags_spans_the_plot_and_the_largest_lag_its_height() -> None:
    worker = LagSeries(
        "worker", "h1", 7,
        ((NOW - timedelta(hours=2), 500), (NOW - timedelta(hours=1), 40), (NOW, 10)),
    )  # fmt: skip
    server = LagSeries("server", "h1", 8, ((NOW - timedelta(minutes=30), 0),))
    gone = LagSeries("worker", "h2", 9, ((NOW - timedelta(hours=3), 99),))
    plot = _plot([server, worker, gone], NOW)
    assert plot["top"] == 40  # the point two hours ago is off the plot, and so is h2's
    assert [line["label"] for line in plot["lines"]] == ["server h1:8", "worker h1:7"]
    assert plot["lines"][1]["dots"] == [(0.0, 0.0), (600.0, 90.0)]  # an hour ago, top; now
    assert plot["lines"][1]["points"] == "0.0,0.0 600.0,90.0"
    assert plot["lines"][0]["dots"] == [(300.0, 120.0)] and plot["lines"][0]["last"] == 0
    assert plot["lines"][0]["colour"] != plot["lines"][1]["colour"]


def test_no_lag_and_all_zero_lags_still_plot() -> None:
    assert _plot([], NOW)["lines"] == []
    idle = _plot([LagSeries("worker", "h", 1, ((NOW, 0),))], NOW)
    assert idle["top"] == 1 and idle["lines"][0]["dots"] == [(600.0, 120.0)]
