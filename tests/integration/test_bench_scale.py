"""`memstream bench scale` on a cluster of its own (3 brokers, 3 Redis, one killed and restarted):
the report's shape and that every figure is measured, not its speed. Marked `cluster`: it runs
in `make test-cluster`, beside the fault tests, not in `make test`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def test_bench_scale_reports_every_figure_of_its_own_cluster(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Its own 3 brokers and 3 Redis on free ports, started by the bench (it kills a broker):
    # it needs nothing of the suite's stack.
    tiny = ["--scale-rounds", "2", "--scale-turns", "8", "--scale-fresh", "2"]
    tiny += ["--scale-memories", "200", "--scale-tenants", "10", "--scale-queries", "20"]
    tiny += ["--scale-worker-turns", "40", "--scale-rate", "5", "--scale-phase-s", "2"]
    tiny += ["--scale-replay-turns", "60", "--scale-replay-rounds", "1"]
    tiny += ["--out", str(tmp_path), "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "memstream", "bench", "scale", *tiny],
        env=env,
        capture_output=True,
        text=True,
        # Three JVMs started, one killed and restarted on a busy machine: ~5 min at load 15.
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    scale = json.loads(done.stdout)["results"]["scale"]
    assert (scale["brokers"], scale["shards"], scale["partitions"]) == (3, 3, 6)
    assert scale["only"] == "all"
    _assert_ratios(scale, rounds=2, turns=8, fresh=2, queries=20)
    assert {w: scale["workers"][w]["events"] for w in ("1", "2")} == {"1": 40, "2": 40}
    assert all(scale["workers"][w]["events_per_s"] > 0 for w in ("1", "2"))
    replay = scale["replay"]
    assert replay["events"] >= 60 and replay["rounds"] == 1
    assert replay["memories"] == 120  # a turn is two memories
    assert 0 < replay["redis_used_mib"] <= replay["redis_peak_mib"], replay
    for side in ("1", "3"):
        figures = replay["processes"][side]
        assert figures["events_per_s_replaying"] > 0 and figures["wall_s"] > 0, figures
        assert figures["peak_rss_mib_per_process"] > 10, figures
    moved = scale["reshard"]
    assert (moved["from_shards"], moved["to_shards"], moved["moved_partitions"]) == (1, 2, 3)
    assert moved["elapsed_s"] >= moved["warm_s"] > 0 and moved["turns"] > 0
    assert moved["old_shard_window_s"] >= 0 and moved["recalls"] > 0
    assert (moved["recall_errors"], moved["lost"], moved["doubled"]) == (0, 0, 0)
    kill = scale["broker_kill"]
    assert kill["rejoined_s"] >= kill["failover_s"] > 0
    assert kill["records"] == kill["turns"]  # one record per turn: none lost, none doubled
    for phase in ("before", "during", "after"):
        assert kill[phase]["turns"] > 0
        assert 0 < kill[phase]["hook_p50_ms"] <= kill[phase]["hook_p99_ms"]
        assert kill[phase]["raw_enqueue_p99_ms"] > 0
    for c in scale["comparisons"]:
        assert math.isfinite(c["ours"]) and c["ours"] > 0, c
        assert math.isfinite(c["raw"]) and c["raw"] > 0, c
    assert {p.name for p in tmp_path.iterdir()} == {"report.json", "report.md", "report.png"}


def test_bench_scale_only_ratios_measures_the_ratios_and_nothing_else(
    env: dict[str, str], tmp_path: Path
) -> None:
    tiny = ["--scale-only", "ratios", "--scale-rounds", "3", "--scale-turns", "4"]
    tiny += ["--scale-fresh", "1", "--scale-memories", "100", "--scale-tenants", "6"]
    tiny += ["--scale-queries", "10", "--out", str(tmp_path), "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "memstream", "bench", "scale", *tiny],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,  # three JVMs started on a busy machine
        check=False,
    )
    assert done.returncode == 0, done.stderr
    scale = json.loads(done.stdout)["results"]["scale"]
    assert scale["only"] == "ratios"
    _assert_ratios(scale, rounds=3, turns=4, fresh=1, queries=10)
    assert not {"workers", "reshard", "broker_kill"} & set(scale)
    assert len(scale["comparisons"]) == 4


def _assert_ratios(
    scale: dict[str, Any], *, rounds: int, turns: int, fresh: int, queries: int
) -> None:
    """Every ratio of issue 23's targets, per round and as its median with the range."""
    assert [r["round"] for r in scale["rounds"]] == list(range(1, rounds + 1))
    for each in scale["rounds"]:
        for side in ("sharded", "unsharded"):
            assert each[f"{side}_events_per_s"] > 0 and each[f"{side}_freshness_p50_ms"] > 0
        for way in ("routed_one", "direct_one", "routed_three"):
            assert each[f"{way}_p99_ms"] > 0
    pooled = scale["pooled"]
    assert pooled["events_per_side"] == rounds * turns
    assert pooled["fresh_turns_per_side"] == rounds * fresh
    assert pooled["queries_per_way"] == rounds * queries
    ratios = scale["ratios"]
    assert set(ratios) == {"throughput", "freshness_p50", "recall_p99", "routed_three_p99"}
    for name, spread in ratios.items():
        per_round = sorted(each[f"{name}_ratio"] for each in scale["rounds"])
        assert (spread["min"], spread["max"]) == (per_round[0], per_round[-1])
        middle = (per_round[(rounds - 1) // 2] + per_round[rounds // 2]) / 2
        assert spread["median"] == pytest.approx(middle, abs=1e-3)
        assert spread["rounds"] == rounds and spread["pooled"] > 0
    medians = {c["measure"].split(",")[0]: c for c in scale["comparisons"] if c["unit"] == "x"}
    assert medians["1 shard: recall p99"]["ours"] == ratios["recall_p99"]["median"]
    assert len(medians) == 4
