"""`memstream bench asof` end to end in a tiny configuration: what it reports, not how fast."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .commands import memstream

pytestmark = pytest.mark.integration


def test_bench_asof_reports_as_of_and_history_beside_a_raw_read(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    args = ["--asof-events", "400", "--asof-memories", "20"]
    done = memstream(env, "bench", "asof", *args, "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    asof = json.loads(done.stdout)["results"]["asof"]
    assert asof["events"] == 400 and asof["tenant_events"] == 80
    # The bound holds in the view, and most of it still stands in the projection.
    assert 0 < asof["view_memories"] <= 20
    assert asof["vectors_reused"] + asof["vectors_embedded"] == asof["view_memories"]
    assert asof["vectors_reused"] > 0
    fields = (
        "first_s", "first_cpu_s", "repeated_p50_ms", "history_first_s",
        "history_repeated_p50_ms", "explain_first_s", "explain_repeated_p50_ms",
        "raw_partition_read_s",
    )  # fmt: skip
    for field in fields:
        assert asof[field] > 0, field
    assert asof["explained_turns"] > 0  # the run's turns were found and traced
