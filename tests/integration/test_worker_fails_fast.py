"""A worker whose projection raises what it does not expect (a defect, not an outage: those are
retried) exits non-zero and says why, instead of living on without projecting; its supervisor
then starts a fresh one, which reads on from the last commit and applies each event once.

`bench chaos` found the opposite: a projection agent that raised was started again inside the
same process, and the worker hung at the next rebalance on the messages its first agent had
taken, alive and projecting nothing. The defect is injected here by patching the projector in
the worker's own process, the way a bug would sit there."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstream import Settings
from memstream.deployment import Deployment
from memstream.operations import drop

from .helpers import TestStack, start_worker, stop_worker, wait_until

pytestmark = pytest.mark.integration

# The worker, with a projector that fails every batch holding a turn of tenant "doomed".
DEFECTIVE_WORKER = """
import sys
from memstream.cli.main import main
from memstream.streams import projector

real = projector.Projector.commit

async def commit(self, prepared, **options):
    if any(event.tenant == "doomed" for event, _, _ in prepared.ready):
        raise RuntimeError("a defect in the projector")
    return await real(self, prepared, **options)

projector.Projector.commit = commit
sys.exit(main(["worker", "--loglevel", "warning", "--metrics-port", "0"]))
"""


@pytest.fixture
def own_env(env: dict[str, str]) -> Iterator[dict[str, str]]:
    namespace = f"failfast-{uuid.uuid4().hex[:8]}"
    own = env | {"MEMSTREAM_NAMESPACE": namespace, "MEMSTREAM_WORKER_SESSION_TIMEOUT": "6"}
    yield own
    drop(Deployment(Settings.from_env(own)))


def test_a_worker_whose_projection_raises_exits_and_a_fresh_one_goes_on(
    own_env: dict[str, str], tmp_path: Path
) -> None:
    stack = TestStack(Settings.from_env(own_env))
    log = tmp_path / "worker.log"
    with log.open("ab") as out:
        defective = subprocess.Popen(
            [sys.executable, "-c", DEFECTIVE_WORKER],
            env=own_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        stack.wait_until_projecting(defective, log)
        doomed = stack.turn("doomed", "will this be projected?", "by the next worker")
        stack.publish([doomed])
        wait_until(lambda: defective.poll() is not None, "the defective worker to exit", 120)
    finally:
        if defective.poll() is None:
            defective.kill()
    assert defective.returncode != 0
    assert "a defect in the projector" in log.read_text(errors="replace")

    fresh_log = tmp_path / "fresh.log"
    fresh = start_worker(own_env, fresh_log)
    try:
        wait_until(lambda: not stack.status.unapplied([doomed]), "a fresh worker to apply it")
    finally:
        stop_worker(fresh, fresh_log)
