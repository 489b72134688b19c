"""The in-memory projection's state: per namespace, in this process, behind one lock.

A namespace holds its generations (each tenant's fold of events, vectors and recorded
outcomes, and the log positions taken in), which one is live, and what a deployment keeps
beside the projection (API keys, sessions' working memory, heartbeats, the agent's journal).
`namespace(name)` is the one door: every part of a projection of that name shares the same
state, whichever `InMemoryProjection` made it, as clients of one Redis share its keys.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import date, datetime

from memstream.agent.journal import InMemoryJournal
from memstream.memory.bounds import Bounds
from memstream.memory.embeddings import Vectors
from memstream.memory.history import Fold
from memstream.memory.ports import AppliedOutcome, ProcessReport

__all__ = ["Generation", "Namespace", "Session", "TenantState", "namespace"]


@dataclass(slots=True)
class TenantState:
    """One tenant in one generation: its memories and tombstones (the fold), each memory's
    vector and facet vectors, and each applied event's outcome (its applied marker)."""

    fold: Fold = field(default_factory=lambda: Fold(Bounds(0)))
    vectors: dict[str, Vectors] = field(default_factory=dict)
    facets: dict[str, Vectors] = field(default_factory=dict)
    outcomes: dict[str, AppliedOutcome] = field(default_factory=dict)


@dataclass(slots=True)
class Generation:
    """One generation: the model its vectors are of (None: no index yet), its tenants and the
    positions ("topic/partition" -> last offset) it has taken into account."""

    model: str | None = None
    dims: int = 0
    tenants: dict[str, TenantState] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Session:
    """A session's working memory: its document, version, owner and expiry (time.time();
    None: kept until deleted)."""

    document: str
    version: int
    owner: str | None
    expires_at: float | None


class Namespace:
    """Everything of one namespace. Hold `lock` (re-entrant) for any read or write; `changed`
    is notified after every apply, for those waiting on one."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.clear()

    def clear(self) -> None:
        """Forget everything (a drop); those holding this namespace see it empty."""
        with self.lock:
            self.live = 1
            self.counter = 0  # the last generation number handed out (0: none yet)
            self.generations: dict[int, Generation] = {}
            self.api_keys: dict[str, str] = {}
            self.sessions: dict[tuple[str, str], Session] = {}
            self.processes: dict[tuple[str, int], tuple[ProcessReport, float]] = {}
            # (kind, host, pid) -> (report time, lag), oldest first, within LAG_HISTORY.
            self.lags: dict[tuple[str, str, int], list[tuple[datetime, int]]] = {}
            self.tokens: dict[date, dict[tuple[str, str], int]] = {}
            self.journal = InMemoryJournal()
            self.changed.notify_all()

    def generation(self, number: int) -> Generation:
        return self.generations.setdefault(number, Generation())

    def tenant(self, number: int, tenant: str) -> TenantState:
        return self.generation(number).tenants.setdefault(tenant, TenantState())

    def held(self, number: int, tenant: str) -> TenantState | None:
        """The tenant's state in generation `number`, without making one."""
        found = self.generations.get(number)
        return found.tenants.get(tenant) if found is not None else None


_NAMESPACES: dict[str, Namespace] = {}
_MAKING = threading.Lock()


def namespace(name: str) -> Namespace:
    """The state of namespace `name` in this process (made empty on first use)."""
    with _MAKING:
        return _NAMESPACES.setdefault(name, Namespace())
