"""The `memstream worker` process as an operator runs it: what it runs on, what it logs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstream import Settings
from memstream.deployment import Deployment
from memstream.operations import drop

from .helpers import running_worker, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def quiet_env(env: dict[str, str]) -> Iterator[dict[str, str]]:
    """A namespace of its own, for a worker of its own."""
    quiet = env | {"MEMSTREAM_NAMESPACE": f"quiet-{uuid.uuid4().hex[:8]}"}
    yield quiet
    drop(Deployment(Settings.from_env(quiet)))


def test_the_worker_runs_on_uvloop(worker: Path) -> None:
    # Said once Faust has started everything (the session's worker may be younger than its
    # first projection: the line can trail it).
    wait_until(
        lambda: "running on uvloop's event loop" in worker.read_text(),
        "the worker to say which event loop it runs on",
    )


def test_a_worker_at_loglevel_warning_writes_a_plain_log(
    quiet_env: dict[str, str], tmp_path: Path
) -> None:
    # faust's terminal spinner hid the cursor when the worker started and showed it when it
    # stopped, into the log file, and made every library build its debug records.
    log = tmp_path / "worker.log"
    with running_worker(quiet_env, log, loglevel="warning"):
        pass  # projecting once the block starts, stopped once it ends
    text = log.read_text()
    assert "\x1b" not in text, f"terminal control codes in the worker's log: {text[-300:]!r}"
