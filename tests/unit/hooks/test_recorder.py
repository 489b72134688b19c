"""The turn recorder runs its steps on one thread, in submission order, and flushes on demand."""

from __future__ import annotations

import threading

import pytest

from memstream.errors import ConfigurationError, KafkaUnavailableError
from memstream.hooks.recorder import TurnRecorder


def test_steps_run_in_submission_order_off_the_submitting_thread() -> None:
    recorder = TurnRecorder()
    ran: list[tuple[int, str]] = []
    for i in range(500):
        recorder.submit(lambda i=i: ran.append((i, threading.current_thread().name)))
    assert recorder.flush(timeout=10)
    assert [i for i, _ in ran] == list(range(500))
    assert {name for _, name in ran} == {"memstream-recorder"}
    recorder.close()


def test_flush_waits_for_a_step_still_running() -> None:
    recorder = TurnRecorder()
    release = threading.Event()
    finished: list[str] = []
    recorder.submit(lambda: (release.wait(10), finished.append("slow")))
    assert not recorder.flush(timeout=0.05)  # the step holds: flush says it did not get there
    release.set()
    assert recorder.flush(timeout=10)
    assert finished == ["slow"]
    recorder.close()


def test_a_failing_step_does_not_stop_the_ones_after_it() -> None:
    recorder = TurnRecorder()
    ran: list[int] = []

    def fail() -> None:
        raise ValueError("a bug in a step")

    recorder.submit(fail)
    recorder.submit(lambda: ran.append(1))
    assert recorder.flush(timeout=10)
    assert ran == [1]
    recorder.close()


def test_a_full_recorder_refuses_at_once_and_says_why() -> None:
    recorder = TurnRecorder(capacity=2)
    started, release = threading.Event(), threading.Event()
    recorder.submit(lambda: (started.set(), release.wait(10)))
    assert started.wait(10)  # the thread holds it: it is no longer pending
    recorder.submit(lambda: None)
    recorder.submit(lambda: None)
    with pytest.raises(KafkaUnavailableError, match="not keeping up"):
        recorder.submit(lambda: None)
    release.set()
    assert recorder.flush(timeout=10)
    recorder.close()


def test_close_runs_what_is_pending_then_refuses_more() -> None:
    recorder = TurnRecorder()
    ran: list[int] = []
    for i in range(50):
        recorder.submit(lambda i=i: ran.append(i))
    assert recorder.close(timeout=10)
    assert ran == list(range(50))
    with pytest.raises(ConfigurationError, match="closed"):
        recorder.submit(lambda: None)
