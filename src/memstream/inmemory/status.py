"""What the in-memory projection's live generation has applied: markers, counts, positions
(the `ProjectionProgress` port). `wait_applied` waits on the namespace's condition, which every
apply and swap notifies, so no poll and no sleep stands between an apply and its waiter."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from memstream.inmemory.state import Namespace
from memstream.memory.ports import Identified, Marked, TenantStats
from memstream.memory.tenancy import TenantId, validate_tenant

__all__ = ["InMemoryStatus"]


class InMemoryStatus:
    def __init__(self, state: Namespace) -> None:
        self._state = state

    def live_generation(self) -> int:
        return self._state.live

    def unapplied(self, events: Sequence[Marked]) -> list[Marked]:
        with self._state.lock:
            return [event for event in events if not self._applied(event)]

    def _applied(self, event: Identified) -> bool:
        held = self._state.held(self._state.live, event.tenant)
        return held is not None and event.id in held.outcomes

    def wait_applied(
        self,
        events: Sequence[Marked],
        timeout_s: float,
        tick: Callable[[int, int], None] | None = None,
    ) -> list[Marked]:
        """Wait until each tenant's last event of `events` is applied (a tenant's events are
        applied in log order), or `timeout_s` passed; those still unapplied."""
        last = list({event.tenant: event for event in events}.values())
        tenants = len(last)
        deadline = time.monotonic() + timeout_s
        with self._state.changed:
            while True:
                last = self.unapplied(last)
                if tick is not None:
                    tick(tenants - len(last), tenants)
                left = deadline - time.monotonic()
                if not last or left <= 0:
                    return last
                self._state.changed.wait(left)

    def memory_count(self, tenant: TenantId) -> int:
        with self._state.lock:
            held = self._state.held(self._state.live, validate_tenant(tenant))
            return len(held.fold.memories) if held is not None else 0

    def positions(self) -> dict[str, int]:
        with self._state.lock:
            return dict(self._state.generation(self._state.live).positions)

    def tenant_stats(self, tenant: TenantId | None = None) -> list[TenantStats]:
        with self._state.lock:
            held = self._state.generation(self._state.live).tenants
            chosen = list(held) if tenant is None else [validate_tenant(tenant)]
            stats = []
            for name in chosen:
                memories = held[name].fold.memories.values() if name in held else ()
                times = [m.timestamp for m in memories]
                if times:
                    stats.append(
                        TenantStats(validate_tenant(name), len(times), min(times), max(times))
                    )
        return sorted(stats, key=lambda s: s.tenant)
