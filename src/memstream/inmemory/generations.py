"""The in-memory projection's generations (which is live, new ones for rebuilds, the swaps,
clean-up) and the comparer `verify` uses, with the Redis projection's rules (swap.lua): a
rebuild swaps in only once its positions have caught up with the live generation's, and only
if no other rebuild was swapped in since it started."""

from __future__ import annotations

from memstream.inmemory.state import Namespace, TenantState
from memstream.memory.comparison import differences
from memstream.memory.model import Memory
from memstream.memory.ports import Difference, SwapResult
from memstream.memory.tenancy import TenantId

__all__ = ["InMemoryComparer", "InMemoryGenerations"]


class InMemoryGenerations:
    def __init__(self, state: Namespace) -> None:
        self._state = state

    async def live(self) -> int:
        return self._state.live

    async def model(self, generation: int) -> str | None:
        with self._state.lock:
            held = self._state.generations.get(generation)
            return held.model if held is not None else None

    async def allocate(self) -> int:
        """A generation number never used before in this namespace."""
        with self._state.lock:
            self._state.counter = max(self._state.counter, self._state.live) + 1
            return self._state.counter

    async def swap_all(self, live: int, rebuilt: int) -> SwapResult:
        with self._state.changed:
            result = self._ready(live, rebuilt)
            if result is SwapResult.SWAPPED:
                self._state.live = rebuilt
                self._state.changed.notify_all()
            return result

    async def swap_tenant(self, live: int, rebuilt: int, tenant: str, partition: str) -> SwapResult:
        """Replace the tenant's live state by its rebuilt one, which leaves the rebuild."""
        with self._state.changed:
            result = self._ready(live, rebuilt, only=partition)
            if result is SwapResult.SWAPPED:
                moved = self._state.generation(rebuilt).tenants.pop(tenant, TenantState())
                self._state.generation(live).tenants[tenant] = moved
                self._state.changed.notify_all()
            return result

    def _ready(self, live: int, rebuilt: int, only: str | None = None) -> SwapResult:
        if self._state.live != live:
            return SwapResult.STALE
        caught_up = self._state.generation(rebuilt).positions
        for name, offset in self._state.generation(live).positions.items():
            if (only is None or name == only) and caught_up.get(name, -1) < offset:
                return SwapResult.BEHIND
        return SwapResult.SWAPPED

    async def drop(self, generation: int) -> None:
        with self._state.lock:
            self._state.generations.pop(generation, None)


class InMemoryComparer:
    """Two generations of the namespace, tenant by tenant (`memory.comparison` says what
    differs)."""

    def __init__(self, state: Namespace) -> None:
        self._state = state

    async def tenants(self, generation: int) -> set[str]:
        """The tenants with memories or tombstones in `generation`."""
        with self._state.lock:
            held = self._state.generations.get(generation)
            tenants = held.tenants.items() if held is not None else ()
            return {t for t, s in tenants if s.fold.memories or s.fold.tombstones}

    async def compare(self, live: int, rebuilt: int, tenant: TenantId) -> list[Difference]:
        with self._state.lock:
            one = self._state.held(live, tenant) or TenantState()
            other = self._state.held(rebuilt, tenant) or TenantState()
            return differences(
                tenant,
                _memories(one),
                _memories(other),
                one.fold.tombstones,
                other.fold.tombstones,
            )


def _memories(tenant: TenantState) -> dict[str, Memory | None]:
    return dict(tenant.fold.memories)
