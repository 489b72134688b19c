"""Test doubles shared by unit and integration tests (never the only test of a behaviour)."""

from __future__ import annotations

from datetime import datetime

from memstream.agent import AgentMiddleware, Proceed, RunContext, Turn
from memstream.memory.monitoring import MonitoringEvent, Skipped


class Crash(Exception):
    """Stands for the process dying: nothing in the runtime handles it."""


class CrashAfterMemory(AgentMiddleware):
    """Registered outside memory: its after_agent runs after memory recorded the turn, and
    crashes while `armed`."""

    id = "crash"

    def __init__(self) -> None:
        self.armed = True

    def after_agent(self, turn: Turn, context: RunContext) -> Proceed:
        if self.armed:
            raise Crash("the process died after memory recorded the turn")
        return Proceed()


class CollectingMonitor:
    def __init__(self) -> None:
        self.events: list[Skipped] = []

    def announce(self, event: MonitoringEvent) -> None:
        assert isinstance(event, Skipped), event  # the agent side announces nothing else
        self.events.append(event)


class FixedClock:
    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now
