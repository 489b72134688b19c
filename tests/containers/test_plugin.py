"""memstream's pytest plugin as a user meets it: a test suite of theirs (example_suite/, the
LangChain agent test docs/integrations.md shows, and a test of the HTTP API) run by a pytest
of its own, on containers through the engine's Docker API (testcontainers' reaper off, as
podman needs); afterwards nothing of the stack is left in the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.user_suite import run_user_suite


def _ours(engine: Any) -> tuple[list[str], list[str]]:
    containers = [
        c.name for c in engine.containers.list(all=True) if c.name.startswith("memstream-test-")
    ]
    networks = sorted(n.name for n in engine.networks.list())
    return containers, networks


def test_a_users_suite_runs_on_containers_and_leaves_nothing(engine: Any, tmp_path: Path) -> None:
    _, networks_before = _ours(engine)
    run_user_suite(
        tmp_path,
        "--memstream-backend=containers",
        "--memstream-server",
        env={"TESTCONTAINERS_RYUK_DISABLED": "true"},
    )
    containers, networks = _ours(engine)
    assert containers == [], "the plugin left containers behind"
    assert networks == networks_before, "the plugin left its network behind"
