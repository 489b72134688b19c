"""`memstream bench scale` on a cluster of its own (3 brokers, 3 Redis, one killed and restarted):
the report's shape and that every figure is measured, not its speed. Marked `cluster`: it runs
in `make test-cluster`, beside the fault tests, not in `make test`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def test_bench_scale_reports_every_figure_of_its_own_cluster(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Its own 3 brokers and 3 Redis on free ports, started by the bench (it kills a broker):
    # it needs nothing of the suite's stack.
    tiny = ["--scale-turns", "40", "--scale-fresh", "4", "--scale-memories", "200"]
    tiny += ["--scale-tenants", "10", "--scale-queries", "20", "--scale-rate", "5"]
    tiny += ["--scale-phase-s", "2", "--out", str(tmp_path), "--json"]
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
    one = scale["one_shard"]
    for side in ("sharded", "unsharded"):
        assert one[f"{side}_events_per_s"] > 0
        assert 0 < one[f"{side}_freshness_p50_ms"] <= one[f"{side}_freshness_p99_ms"]
    assert one["events"] == 40 and one["recall_p99_ms"] > 0
    recall = scale["recall"]
    for way in ("routed_one", "direct_one", "routed_one_static", "routed_three"):
        assert 0 < recall[f"{way}_p50_ms"] <= recall[f"{way}_p99_ms"]
    assert {w: scale["workers"][w]["events"] for w in ("1", "2")} == {"1": 40, "2": 40}
    assert all(scale["workers"][w]["events_per_s"] > 0 for w in ("1", "2"))
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
