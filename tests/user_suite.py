"""Runs tests/containers/example_suite/ as a user's own suite: copied out of this project, in a
pytest of its own that finds memstream's plugin through its entry point."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent / "containers" / "example_suite"


def run_user_suite(folder: Path, *options: str, env: dict[str, str] | None = None) -> None:
    """Run the example suite from `folder` with the plugin's `options`; both its tests pass."""
    shutil.copytree(EXAMPLE, folder / "suite")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, "suite"],
        cwd=folder,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout, done.stdout[-2000:]
