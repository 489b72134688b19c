"""Reading the in-memory projection's live generation: memories (whole, filtered, by id), the
tombstones the server checks before a write, and a key-value store's items (field-by-field
similarity to a query, TTL refreshes) — the `MemoryLookup`, `TombstoneReader` and `ItemIndex`
ports."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

import numpy as np

from memstream.inmemory.live import LiveReads
from memstream.inmemory.state import Namespace, TenantState
from memstream.memory.embeddings import Embedders, Vectors, cosines
from memstream.memory.events import DOCUMENT_SEPARATOR
from memstream.memory.model import Memory
from memstream.memory.store import MemoryFilter
from memstream.memory.tenancy import TenantId, validate_tenant

__all__ = ["InMemoryItems", "InMemoryReader", "InMemoryTombstones"]


class InMemoryReader:
    def __init__(self, state: Namespace) -> None:
        self._state = state

    def memories(self, tenant: TenantId, where: MemoryFilter | None = None) -> list[Memory]:
        """The tenant's memories in the live generation (those `where` matches), oldest first."""
        with self._state.lock:
            held = self._state.held(self._state.live, validate_tenant(tenant))
            found = list(held.fold.memories.values()) if held is not None else []
        matching = [m for m in found if where is None or where.matches(m)]
        return sorted(matching, key=lambda m: (m.timestamp, m.id))

    def memories_by_id(self, tenant: TenantId, ids: Sequence[str]) -> list[Memory | None]:
        with self._state.lock:
            held = self._state.held(self._state.live, validate_tenant(tenant))
            stored = held.fold.memories if held is not None else {}
            return [stored.get(memory_id) for memory_id in ids]

    def documents(self, tenant: TenantId, collection: str) -> dict[str, str]:
        prefix = f"{collection}{DOCUMENT_SEPARATOR}"
        with self._state.lock:
            held = self._state.held(self._state.live, validate_tenant(tenant))
            stored = held.fold.documents if held is not None else {}
            return {f.removeprefix(prefix): b for f, b in stored.items() if f.startswith(prefix)}


class InMemoryTombstones:
    """The live generation's tombstones, for the server's write path (on its event loop:
    nothing here waits)."""

    def __init__(self, state: Namespace) -> None:
        self._state = state

    async def forgotten(
        self, asked: Mapping[str, Collection[str]]
    ) -> dict[str, set[str] | Exception]:
        found: dict[str, set[str] | Exception] = {}
        with self._state.lock:
            for tenant, ids in asked.items():
                held = self._state.held(self._state.live, tenant)
                dead = held.fold.tombstones if held is not None else frozenset()
                found[tenant] = {memory_id for memory_id in ids if memory_id in dead}
        return found

    async def aclose(self) -> None:
        """Nothing to close: no connection was opened."""


class InMemoryItems:
    """A key-value store's items in the live generation."""

    def __init__(self, state: Namespace, embedders: Embedders) -> None:
        self._state = state
        self._live = LiveReads(state, embedders)

    def similarities(
        self, tenant: TenantId, memory_ids: Sequence[str], text: str
    ) -> dict[str, float]:
        if not memory_ids:
            return {}

        def scored(held: TenantState | None, query: Vectors) -> dict[str, float]:
            scores: dict[str, float] = {}
            for memory_id in memory_ids:
                stored = held.fold.memories.get(memory_id) if held is not None else None
                if held is None or stored is None or not stored.content:
                    continue  # not stored, or stored without text: nothing to compare
                matrix = held.facets.get(memory_id)
                if matrix is None:
                    matrix = held.vectors[memory_id].reshape(1, -1)
                scores[memory_id] = float(np.max(cosines(matrix, query)))
            return scores

        return self._live.read(validate_tenant(tenant), text, scored)

    def refresh(self, tenant: TenantId, leases: Sequence[tuple[str, str, datetime]]) -> None:
        """Move each item's deadline later, where the slot still holds the put that leased it
        (`memory.events.Lapse` reads the same fields when the item lapses)."""
        with self._state.lock:
            held = self._state.held(self._state.live, validate_tenant(tenant))
            if held is None:
                return
            stored = held.fold.memories
            for memory_id, event_id, deadline in leases:
                memory = stored.get(memory_id)
                if memory is None or memory.event_id != event_id or memory.expires_at is None:
                    continue
                if memory.expires_at < deadline:
                    # The eviction order does not depend on the deadline: it stays valid.
                    stored[memory_id] = dataclasses.replace(memory, expires_at=deadline)
