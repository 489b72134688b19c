"""Recording off the turn: `TurnRecorder`, one thread that does a turn's writes in order.

A turn's record is a handful of small steps in Python: resolve the tenant's cell, journal the
effect as started, build and score the event, take a slot in the publisher's buffer. Alone
each is microseconds, but with eight agent threads in one interpreter any Python span of that
length is sometimes preempted at the lock's 5 ms switch interval, and that preemption, not
the work, is the hook's tail (docs/benchmarks.md, "Hot-path budget"). So the hook only
appends the turn to a deque (one C call, as cheap as handing a record to librdkafka) and this
thread does the steps, in submission order, so a tenant's turns reach the log in the order
they ended.

Nothing is less durable than before: the record's effect is still journaled as started before
its event can be sent, and a run still running when its process dies is recovered from the
start. What a process holds here when it dies is what its publisher's buffer would have
held: `flush` waits for both (erasure, shutdown, tests). The deque is bounded: when it is
full `submit` raises `KafkaUnavailableError` at once, as a full buffer does, and the turn
is skipped and announced.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from memstream.errors import ConfigurationError, KafkaUnavailableError

__all__ = ["TurnRecorder"]

log = logging.getLogger(__name__)

# How long the idle thread sleeps before it looks again without being woken: a safety net,
# the hook wakes it when it finds it idle.
_IDLE_WAIT_S = 0.05


class TurnRecorder:
    def __init__(self, *, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._pending: deque[Callable[[], None]] = deque()
        self._idle = False
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="memstream-recorder", daemon=True)
        self._thread.start()

    def submit(self, step: Callable[[], None]) -> None:
        """Run `step` on the recorder's thread, after every step submitted before it. `step`
        handles its own failures (the middleware announces what it skipped)."""
        if self._stopping:
            raise ConfigurationError(
                "this deployment's turn recorder is closed (the deployment was closed); "
                "record through a deployment that is still open"
            )
        if len(self._pending) >= self._capacity:
            raise KafkaUnavailableError(
                f"the turn recorder holds {self._capacity} turns not yet handed to Kafka's "
                "buffer; its writes are not keeping up (is the journal's Redis or the broker "
                "reachable? `memstream status`)"
            )
        self._pending.append(step)
        if self._idle:
            self._wake.set()

    def flush(self, timeout: float) -> bool:
        """Wait until every step submitted so far has run; False if `timeout` passed first.
        (A marker queued behind them: the steps run in order, so when it runs they have.)"""
        reached = threading.Event()
        self._pending.append(reached.set)
        self._wake.set()
        return reached.wait(timeout)

    def close(self, timeout: float = 10.0) -> bool:
        """Run what is pending, then stop the thread; False if it did not finish in time."""
        flushed = self.flush(timeout)
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)
        return flushed

    def _run(self) -> None:
        pending = self._pending
        while not (self._stopping and not pending):
            if not pending:
                # Idle only after one more look: a step appended before `_idle` was set is
                # seen here; one appended after it finds `_idle` set and wakes the thread.
                self._idle = True
                if not pending:
                    self._wake.wait(_IDLE_WAIT_S)
                self._wake.clear()
                self._idle = False
                continue
            step = pending.popleft()
            try:
                step()
            except Exception:  # a step announces its own failures; this is a bug's last stop
                log.exception("a turn's recording step failed")
