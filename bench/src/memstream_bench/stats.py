"""Shared statistics and progress for the benches: percentiles, rates, ratios, the spread of a
ratio over rounds, another process's or the whole machine's CPU time, a stderr ticker."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from memstream.errors import InvalidInputError

__all__ = [
    "Latency",
    "Progress",
    "Spread",
    "machine_cpu_s",
    "percentile",
    "process_cpu_s",
    "ratio",
]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between closest ranks (numpy's
    default), so p50 of an even count is the mean of the middle two."""
    if not values:
        raise InvalidInputError("no values to take a percentile of")
    if not 0 <= q <= 100:
        raise InvalidInputError(f"a percentile is between 0 and 100, got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user and system, every thread) process `pid` has used so far, from Linux's
    /proc: on a shared machine, steadier than wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_s() -> float:
    """CPU seconds every core of this machine has spent running code so far (user, system,
    interrupts; not idle, disk waits or time the hypervisor took), from Linux's /proc/stat:
    what a load costs all its processes together."""
    with Path("/proc/stat").open() as stat:
        user, nice, system, _idle, _iowait, irq, softirq = map(int, stat.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def ratio(ours: float, raw: float) -> float:
    """ours / raw, rounded for reports; NaN when the baseline is zero (no meaningful ratio)."""
    return round(ours / raw, 3) if raw else math.nan


@dataclass(frozen=True, slots=True)
class Latency:
    """p50, p95, p99 and mean of a set of durations, in milliseconds."""

    p50_ms: float
    p99_ms: float
    mean_ms: float
    count: int
    p95_ms: float = math.nan

    @classmethod
    def of_seconds(cls, durations: Sequence[float]) -> Latency:
        millis = [d * 1000 for d in durations]
        return cls(
            p50_ms=round(percentile(millis, 50), 4),
            p99_ms=round(percentile(millis, 99), 4),
            mean_ms=round(sum(millis) / len(millis), 4),
            count=len(millis),
            p95_ms=round(percentile(millis, 95), 4),
        )


@dataclass(frozen=True, slots=True)
class Spread:
    """A figure taken once per round: its median over the rounds and its range. A ratio of two
    sides measured in many short interleaved rounds is read as the median; the range says how
    far one round alone could stray."""

    median: float
    low: float
    high: float
    rounds: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise InvalidInputError("no rounds to take the median of")
        return cls(
            median=round(percentile(values, 50), 3),
            low=round(min(values), 3),
            high=round(max(values), 3),
            rounds=len(values),
        )

    def __str__(self) -> str:
        return f"{self.median:.3f} ({self.low:.3f} to {self.high:.3f} over {self.rounds} rounds)"


class Progress:
    """A throttled progress line on stderr: long runs say what they are doing, briefly."""

    def __init__(self, bench: str, *, every_s: float = 2.0, out: TextIO | None = None) -> None:
        self._bench = bench
        self._every_s = every_s
        self._out = out
        self._started = time.monotonic()
        self._last = -math.inf

    def say(self, message: str) -> None:
        self._write(message)

    def tick(self, what: str, done: int, total: int) -> None:
        """Report `done` of `total`, at most once every `every_s` seconds (and at the end)."""
        now = time.monotonic()
        if done < total and now - self._last < self._every_s:
            return
        self._last = now
        self._write(f"{what} {done}/{total}")

    def _write(self, message: str) -> None:
        out = self._out or sys.stderr
        elapsed = time.monotonic() - self._started
        print(f"[bench {self._bench} {elapsed:6.1f}s] {message}", file=out, flush=True)
