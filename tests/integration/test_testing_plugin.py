"""memstream's pytest plugin without a container engine: the user's suite of
tests/containers/example_suite/ (a LangChain agent, the HTTP API) run by a pytest of its own
with `--memstream-backend=local`, on the stack `memstream up` started: a fresh namespace, a
worker and a server of its own, all stopped and the namespace dropped at the end. The same
suite runs on containers in tests/containers/test_plugin.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memstream import Settings
from memstream.deployment import Deployment

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[1] / "containers" / "example_suite"


def test_a_users_suite_runs_on_the_local_stack_and_drops_its_namespace(
    settings: Settings, tmp_path: Path
) -> None:
    client = Deployment(settings).redis
    before = set(client.scan_iter(match="test-*:apikeys"))
    shutil.copytree(EXAMPLE, tmp_path / "suite")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--memstream-backend=local",
            "--memstream-server",
            "suite",
        ],
        cwd=tmp_path,
        env={**os.environ, "DOCKER_HOST": "unix:///nonexistent"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout, done.stdout[-2000:]
    left = set(client.scan_iter(match="test-*:apikeys")) - before
    assert left == set(), f"the plugin left its namespace behind: {left}"
