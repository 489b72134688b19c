"""`memstream bench chaos`, short and with a fixed seed, as `make test-cluster` runs it: faults
from seed 38's plan (every component killed or paused, three episodes of two overlapping
faults, a restart of the workers while behind) under the load of the hook, HTTP writers,
searchers, a tenant's erasure, a foreign producer's junk and schemathesis's negative cases;
then the checker, `verify` and a `replay`. The run must find no defect, and must have done
what it says it did. Marked `cluster`: its own 3 brokers and 3 Redis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memstream_bench.chaos.junk import JUNK

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

SEED = 38


def test_a_short_chaos_run_loses_doubles_and_leaks_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    command = ["bench", "chaos", "--seed", str(SEED), "--minutes", "2"]
    done = subprocess.run(
        [sys.executable, "-m", "memstream", *command, "--out", str(tmp_path), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,  # three JVMs, faults for two minutes, convergence, verify and replay
        check=False,
    )
    chaos = json.loads(done.stdout)["results"]["chaos"] if done.stdout else {}
    assert done.returncode == 0 and chaos["failures"] == [], done.stderr[-5000:]
    assert f"seed {SEED}:" in done.stderr  # printed first, to replay a failure by
    planned = [line for line in chaos["plan"] if line[0].isdigit()]
    assert len(planned) == 6
    done_faults = sum(chaos["faults"].values()) + sum(chaos["faults_skipped"].values())
    assert done_faults == 9  # six episodes, three of them two faults
    assert {kind.split("-")[0] for kind in chaos["faults"]} == {
        "broker", "shard", "worker", "server"
    }  # fmt: skip
    assert all(chaos["writes_checked"][kind] > 10 for kind in ("turn", "memory", "session"))
    assert chaos["forgets_acked"] > 0 and chaos["tenants_erased"] == 1  # one in two minutes
    junk = chaos["junk"]
    for kind in JUNK:
        if kind.code is None:  # the 5 MB event: refused by Kafka every time
            assert junk["refused"][kind.name] > 0 and kind.name not in junk["delivered"]
        else:
            assert junk["delivered"][kind.name] > 0, kind.name
    assert chaos["negative_cases_sent"] > 50
    for op in ("recall", "search", "memory", "turn"):
        assert chaos["operations"][op]["before"]["availability"] == 1.0, chaos["operations"][op]
        assert chaos["operations"][op]["during"]["count"] > 0
    assert chaos["converged_s"] > 0
