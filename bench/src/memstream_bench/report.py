"""The results of a bench run and the folder they go to: JSON, a Markdown table, a PNG chart.

Every bench returns a `BenchResult`: its JSON figures (free-form, documented per bench in
docs/benchmarks.md) and `Comparison` rows, each one figure of memstream beside its raw
baseline from the same run. The Markdown table and the chart are drawn from those rows only.
"""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream_bench.stats import ratio

__all__ = ["BenchResult", "Comparison", "RunReport", "default_results_dir"]


@dataclass(frozen=True, slots=True)
class Comparison:
    """One figure of memstream beside its raw baseline; `ratio` is ours over raw."""

    measure: str
    ours: float
    raw: float
    unit: str
    baseline: str
    higher_is_better: bool
    target: str = ""

    @property
    def ratio(self) -> float:
        return ratio(self.ours, self.raw)

    def as_json(self) -> dict[str, Any]:
        return {
            "measure": self.measure,
            "ours": self.ours,
            "raw": self.raw,
            "unit": self.unit,
            "baseline": self.baseline,
            "ratio": _finite(self.ratio),
            "higher_is_better": self.higher_is_better,
            "target": self.target,
        }


@dataclass(frozen=True, slots=True)
class BenchResult:
    name: str
    figures: Mapping[str, Any]
    comparisons: Sequence[Comparison]
    notes: Sequence[str] = ()
    seconds: float = 0.0
    # Figures over time (x, y), drawn as lines under the bars (e.g. a worker's lag).
    series: Mapping[str, Sequence[tuple[float, float]]] = field(default_factory=dict)
    # What the bench found broken (a chaos run's defects): `memstream bench` then exits 1.
    failures: Sequence[str] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            **self.figures,
            "failures": list(self.failures),
            "comparisons": [c.as_json() for c in self.comparisons],
            "notes": list(self.notes),
            "seconds": round(self.seconds, 1),
        }


@dataclass(frozen=True, slots=True)
class RunReport:
    """A whole run: its results, in order, and what was skipped with why."""

    started: datetime
    results: Sequence[BenchResult]
    skipped: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "started": self.started.isoformat(),
            "machine": {"python": platform.python_version(), "cpus": _cpus()},
            "results": {r.name: r.as_json() for r in self.results},
            "skipped": dict(self.skipped),
        }

    def markdown(self) -> str:
        lines = [
            f"# memstream bench, {self.started:%Y-%m-%d %H:%M} UTC",
            "",
            "| bench | measure | memstream | raw baseline | ratio (ours/raw) | target |",
            "|---|---|---|---|---|---|",
        ]
        for result in self.results:
            for c in result.comparisons:
                lines.append(
                    f"| {result.name} | {c.measure} | {_num(c.ours)} {c.unit} | "
                    f"{_num(c.raw)} {c.unit} ({c.baseline}) | {_num(c.ratio)} | {c.target} |"
                )
        for name, why in self.skipped.items():
            lines.append(f"| {name} | skipped | | | | {why} |")
        notes = [(r.name, note) for r in self.results for note in r.notes]
        if notes:
            lines += ["", "Notes:", ""] + [f"- {name}: {note}" for name, note in notes]
        return "\n".join(lines) + "\n"

    def write(self, folder: Path) -> list[Path]:
        """Write report.json, report.md and report.png into `folder`; return their paths."""
        folder.mkdir(parents=True, exist_ok=True)
        paths = [folder / "report.json", folder / "report.md", folder / "report.png"]
        paths[0].write_text(json.dumps(self.as_json(), indent=2, ensure_ascii=False) + "\n")
        paths[1].write_text(self.markdown())
        self._chart(paths[2])
        return paths

    def _chart(self, path: Path) -> None:
        # Imported here: matplotlib is slow to import and only the report needs it.
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        results = [r for r in self.results if r.comparisons]
        timed = [r for r in self.results if r.series]
        fig, axes = plt.subplots(
            (len(results) + len(timed)) or 1,
            1,
            figsize=(9, 2.2 + 0.55 * max(1, _rows(results)) + 2.5 * len(timed)),
            squeeze=False,
        )
        for axis, result in zip(axes[len(results) :, 0], timed, strict=False):
            for label, points in result.series.items():
                axis.plot([x for x, _ in points], [y for _, y in points], label=label)
            axis.set_xlabel("seconds", fontsize=7)
            axis.set_title(f"{result.name}: over time", fontsize=9, loc="left")
            axis.legend(fontsize=7, loc="upper right")
        for axis, result in zip(axes[:, 0], results, strict=False):
            labels = [c.measure for c in result.comparisons]
            ys = range(len(labels))
            ours = [c.ours for c in result.comparisons]
            raw = [c.raw for c in result.comparisons]
            axis.barh([y + 0.2 for y in ys], ours, height=0.4, label="memstream", color="#3b6ea8")
            axis.barh([y - 0.2 for y in ys], raw, height=0.4, label="raw baseline", color="#bbb")
            for y, c in zip(ys, result.comparisons, strict=True):
                axis.text(
                    c.ours,
                    y + 0.2,
                    f" {_num(c.ours)} {c.unit} (x{_num(c.ratio)})",
                    va="center",
                    fontsize=7,
                )
            axis.set_yticks(list(ys), labels, fontsize=7)
            if all(v > 0 for v in ours + raw) and max(ours + raw) / min(ours + raw) > 50:
                axis.set_xscale("log")
            axis.set_title(result.name, fontsize=9, loc="left")
            axis.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)


def default_results_dir(started: datetime) -> Path:
    return Path("bench-results") / started.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _rows(results: Sequence[BenchResult]) -> int:
    return sum(len(r.comparisons) for r in results)


def _num(value: float) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def _cpus() -> int:
    import os

    return os.cpu_count() or 0
