"""memstream's pytest plugin as a user meets it: a test suite of theirs (example_suite/, the
LangChain agent test docs/integrations.md shows, and a test of the HTTP API) run by a pytest
of its own, which finds the plugin through its entry point, on containers through the
engine's Docker API; afterwards nothing of the stack is left in the engine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).parent / "example_suite"


def _ours(engine: Any) -> tuple[list[str], list[str]]:
    containers = [
        c.name for c in engine.containers.list(all=True) if c.name.startswith("memstream-test-")
    ]
    networks = sorted(n.name for n in engine.networks.list())
    return containers, networks


def test_a_users_suite_runs_on_containers_and_leaves_nothing(engine: Any, tmp_path: Path) -> None:
    _, networks_before = _ours(engine)
    suite = tmp_path / "suite"
    shutil.copytree(EXAMPLE, suite)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--memstream-backend=containers",
            "--memstream-server",
            str(suite),
        ],
        cwd=tmp_path,
        env={**os.environ, "TESTCONTAINERS_RYUK_DISABLED": "true"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout, done.stdout[-2000:]
    containers, networks = _ours(engine)
    assert containers == [], "the plugin left containers behind"
    assert networks == networks_before, "the plugin left its network behind"
