"""The `memstream worker` process as an operator runs it: what it runs on."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import wait_until

pytestmark = pytest.mark.integration


def test_the_worker_runs_on_uvloop(worker: Path) -> None:
    # Said once Faust has started everything (the session's worker may be younger than its
    # first projection: the line can trail it).
    wait_until(
        lambda: "running on uvloop's event loop" in worker.read_text(),
        "the worker to say which event loop it runs on",
    )
