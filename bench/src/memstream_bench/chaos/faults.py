"""A plan's faults carried out on the run's processes, episode after episode, and when each was
in force: from its signal until its target answered again.

A fault that cannot be carried out as planned (its target already down) is recorded as
skipped rather than failing the run; a target that does not come back fails it, since the
run's promises are about a cluster that recovers.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from memstream.errors import MemstreamError
from memstream_bench.chaos.plan import Action, Component, Fault, Plan
from memstream_bench.chaos.processes import Child, Target, send

__all__ = ["Injector", "Window"]


@dataclass(frozen=True, slots=True)
class Window:
    kind: str
    started: float  # monotonic
    ended: float


class Injector:
    """Runs `plan` on `targets` (per component, in index order) in a thread of its own."""

    def __init__(
        self,
        plan: Plan,
        targets: Mapping[Component, Sequence[Target]],
        say: Callable[[str], None],
    ) -> None:
        self._plan, self._targets, self._say = plan, targets, say
        self.windows: list[Window] = []
        self.skipped: Counter[str] = Counter()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="chaos-faults", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float | None = None) -> bool:
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def last_recovery(self) -> float | None:
        with self._lock:
            return max((w.ended for w in self.windows), default=None)

    def kinds_over(self, start: float, end: float) -> set[str]:
        """The kinds of the faults in force at some moment from `start` to `end`."""
        with self._lock:
            return {w.kind for w in self.windows if w.started <= end and start <= w.ended}

    def _run(self) -> None:
        time.sleep(self._plan.calm_before_s)
        for n, episode in enumerate(self._plan.episodes, 1):
            threads = [
                threading.Thread(target=self._fault, args=(n, f), name=f"fault-{n}")
                for f in episode.faults
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            time.sleep(episode.calm_after_s)

    def _fault(self, episode: int, fault: Fault) -> None:
        time.sleep(fault.after_s)
        targets = self._targets[fault.component]
        started = time.monotonic()
        try:
            done = self._apply(fault, targets)
        except (MemstreamError, OSError) as exc:  # a target that does not come back
            self.errors.append(f"episode {episode}, {fault}: {exc}")
            return
        if not done:
            self.skipped[fault.kind] += 1
            return
        ended = time.monotonic()
        with self._lock:
            self.windows.append(Window(fault.kind, started, ended))
        self._say(f"[chaos] {episode}. {fault}: back after {ended - started:.1f}s")

    def _apply(self, fault: Fault, targets: Sequence[Target]) -> bool:
        target = targets[fault.index]
        if fault.action is Action.BEHIND:
            # Every worker stops projecting while the load goes on, then one of them dies
            # and starts afresh with the backlog: a restart while the projection is behind.
            paused = [t for t in targets if send(t, signal.SIGSTOP)]
            if target not in paused:
                for t in paused:
                    send(t, signal.SIGCONT)
                return False
            time.sleep(fault.hold_s)
            send(target, signal.SIGKILL)
            _reap(target)
            for t in paused:
                if t is not target:
                    send(t, signal.SIGCONT)
            target.recover()
            return True
        if fault.action is Action.PAUSE:
            if not send(target, signal.SIGSTOP):
                return False
            time.sleep(fault.hold_s)
            send(target, signal.SIGCONT)
            target.recover()
            return True
        if not send(target, signal.SIGKILL):
            return False
        _reap(target)
        time.sleep(fault.hold_s)
        target.recover()
        return True


def _reap(target: Target) -> None:
    if isinstance(target, Child):
        target.reap()
