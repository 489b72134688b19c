"""Runs tests/containers/example_suite/ as a user's own suite: copied out of this project, in a
pytest of its own that finds memstream's plugin through its entry point."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent / "containers" / "example_suite"


# Added to the suite's copy when asked: where the plugin's stack put the session, written
# before any test runs (a probe of ours, not part of the user's suite).
_NAMESPACE_PROBE = """import pytest


@pytest.fixture(scope="session", autouse=True)
def _record_namespace(memstream_stack):
    with open({path!r}, "w") as found:
        found.write(memstream_stack.env["MEMSTREAM_NAMESPACE"])
"""


def run_user_suite(
    folder: Path, *options: str, env: dict[str, str] | None = None, namespace_to: Path | None = None
) -> None:
    """Run the example suite from `folder` with the plugin's `options`; both its tests pass.
    `namespace_to`: a file the namespace the plugin chose is written to."""
    shutil.copytree(EXAMPLE, folder / "suite")
    if namespace_to is not None:
        probe = _NAMESPACE_PROBE.format(path=str(namespace_to))
        (folder / "suite" / "conftest.py").write_text(probe)
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
