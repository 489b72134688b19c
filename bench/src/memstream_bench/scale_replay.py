"""`bench scale`'s rebuild past one core: the same log over 3 shards replayed by one `memstream
replay` process (its shards rebuilt concurrently, on one core) and by one `memstream replay
--shard N` process per shard at once (each its shard's partitions, on as many cores as the
machine has), in alternating rounds.

Each side is timed end to end, process starts included, as an operator waits on it, and by the
replays' own reports (reading the log to its end, applying, swapping); the peak resident memory
of each process comes from the kernel (`wait4`'s rusage), so a user sees what a rebuild needs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memstream.errors import MemstreamError
from memstream_bench.stats import Progress, Spread

__all__ = ["measure_replays"]

_REPORTED = re.compile(r"read (\d+) events .*? in ([\d.]+)s")


def measure_replays(
    env: Mapping[str, str], shards: int, rounds: int, progress: Progress
) -> dict[str, Any]:
    """Rounds of one process for every shard, then one process per shard, over the namespace
    `env` names, whose live projection is built (so every replay reuses its stored vectors)."""
    sides: dict[str, list[_Replayed]] = {"1": [], str(shards): []}
    for n in range(rounds):
        sides["1"].append(_replay(env, [None]))
        sides[str(shards)].append(_replay(env, list(range(shards))))
        progress.say(
            f"replay round {n + 1}/{rounds}: 1 process {sides['1'][-1].wall_s:.1f}s, "
            f"{shards} processes {sides[str(shards)][-1].wall_s:.1f}s"
        )
    return {
        "events": sides["1"][-1].read,
        "rounds": rounds,
        "processes": {side: _figures(done) for side, done in sides.items()},
    }


class _Replayed:
    def __init__(self, wall_s: float, own_s: float, read: int, peak_kib: Sequence[int]) -> None:
        self.wall_s, self.own_s, self.read, self.peak_kib = wall_s, own_s, read, peak_kib


def _replay(env: Mapping[str, str], shards: Sequence[int | None]) -> _Replayed:
    """`memstream replay` once per entry of `shards` (None: every shard), all at once."""
    started = time.perf_counter()
    logs, processes = [], []
    for shard in shards:
        log = Path(tempfile.mkstemp(prefix="memstream-replay-", suffix=".log")[1])
        logs.append(log)
        command = [sys.executable, "-m", "memstream", "replay"]
        command += ["--shard", str(shard)] if shard is not None else []
        with log.open("w") as out:
            processes.append(
                subprocess.Popen(command, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
            )
    peaks, own, read = [], 0.0, 0
    try:
        for process, log in zip(processes, logs, strict=True):
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            said = log.read_text(errors="replace")
            if process.returncode != 0:
                raise MemstreamError(f"memstream replay failed ({process.returncode}):\n{said}")
            peaks.append(usage.ru_maxrss)  # KiB on Linux
            for count, seconds in _REPORTED.findall(said):
                read += int(count)
                own = max(own, float(seconds))
    finally:
        for log in logs:
            log.unlink(missing_ok=True)
    return _Replayed(time.perf_counter() - started, own, read, peaks)


def _figures(runs: Sequence[_Replayed]) -> dict[str, Any]:
    """Medians over the rounds; events/s counts what the processes together read."""
    return {
        "wall_s": Spread.of([r.wall_s for r in runs]).median,
        "events_per_s_end_to_end": Spread.of([r.read / r.wall_s for r in runs]).median,
        "events_per_s_replaying": Spread.of([r.read / r.own_s for r in runs if r.own_s]).median,
        "peak_rss_mib_per_process": round(max(max(r.peak_kib) for r in runs) / 1024, 1),
    }
