"""A worker asked to stop is gone within its deadline, whatever it waits on."""

from __future__ import annotations

import threading

import pytest

from memstream.streams.worker import STOP_DEADLINE_S, stop_deadline


def test_a_stop_past_its_deadline_writes_every_threads_stack_and_exits(
    capfd: pytest.CaptureFixture[str],
) -> None:
    exited = threading.Event()
    codes: list[int] = []

    def exit_(code: int) -> None:
        codes.append(code)
        exited.set()

    stop_deadline(0.01, exit_)
    assert exited.wait(30)
    assert codes == [1]
    err = capfd.readouterr().err
    assert "most recent call first" in err  # faulthandler's dump, every thread


def test_the_deadline_comes_before_a_supervisors_sigkill() -> None:
    # Kubernetes and `memstream down` wait 30 s after SIGTERM: the stacks must be out first.
    assert 0 < STOP_DEADLINE_S < 30
