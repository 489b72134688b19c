"""The in-memory projection's write side: apply memory events, each at most once, with the
semantics of the Redis projection's apply_once.lua.

Each tenant of a generation is a `memory.history.Fold` — the pure fold of the same rules
(applied once; a tombstoned id never written again; a put replaces its slot and clears its
tombstone; a consolidation only if every member is there; an expiry only while the slot holds
the put that lapsed; an erasure empties the tenant but keeps its applied markers; then the
bound evicts in `bounds.eviction_key` order) — beside its vectors and each event's recorded
outcome, which a redelivery gets back while nothing is written twice. Positions move forward
with every event held, applied now or found applied, as the script's do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from memstream.errors import ConfigurationError
from memstream.inmemory.state import Namespace, TenantState
from memstream.memory.bounds import Bounds
from memstream.memory.embeddings import Vectors
from memstream.memory.events import REGISTRY, Applies
from memstream.memory.history import Change
from memstream.memory.model import Memory
from memstream.memory.ports import AppliedOutcome, Embedded, Position, PositionsBehind
from memstream.memory.provenance import NO_LOG, Logged

__all__ = ["InMemoryWriter"]

_WRITTEN = frozenset({Change.RECORDED, Change.EDITED})
_NOWHERE = Position(*NO_LOG)


class InMemoryWriter:
    """Applies embedded events to one namespace's in-memory projection, each tenant bounded to
    `max_memories` (0: unbounded)."""

    def __init__(self, state: Namespace, *, max_memories: int) -> None:
        self._state = state
        self._bounds = Bounds(max_memories)

    async def ensure_live_index(self, embedding_model: str, dims: int) -> int:
        with self._state.lock:
            live = self._state.live
            await self.ensure_index(embedding_model, dims, live)
            return live

    async def ensure_index(
        self, embedding_model: str, dims: int, generation: int, *, like: int | None = None
    ) -> None:
        """Record the model `generation`'s vectors are of; refuse one built for another
        (vectors are kept as they come: `like` changes nothing here)."""
        with self._state.lock:
            held = self._state.generation(generation)
            if held.model is None:
                held.model, held.dims = embedding_model, dims
            if (held.model, held.dims) != (embedding_model, dims):
                raise ConfigurationError(
                    f"generation {generation} of the in-memory projection holds vectors of "
                    f"{held.model} ({held.dims} dims), but this process embeds with "
                    f"{embedding_model} ({dims} dims); vectors of two models cannot be "
                    "compared. Use the same MEMSTREAM_EMBEDDER, or another MEMSTREAM_NAMESPACE."
                )

    async def apply(
        self,
        batch: Sequence[Embedded],
        *,
        into: int | None = None,
        while_live: int | None = None,
        follows: Mapping[str, int] | None = None,
    ) -> list[AppliedOutcome]:
        """Apply `batch` in order to the live generation, or `into` a rebuild's. With
        `while_live` no longer live, nothing is applied (the caller embeds for the new one);
        with a position behind `follows`, nothing either (PositionsBehind)."""
        with self._state.changed:
            if into is None and while_live is not None and while_live != self._state.live:
                return []
            generation = into if into is not None else self._state.live
            positions = self._state.generation(generation).positions
            behind = {f: o for f, o in (follows or {}).items() if positions.get(f, -1) < o}
            if behind:
                raise PositionsBehind(f"positions behind {behind}")
            outcomes = [self._apply_one(generation, item) for item in batch]
            self._state.changed.notify_all()
        return outcomes

    def _apply_one(self, generation: int, item: Embedded) -> AppliedOutcome:
        event, position = item.event, item.position
        if position is not None:
            self._record_position(generation, position)
        tenant = self._state.tenant(generation, event.tenant)
        recorded = tenant.outcomes.get(event.id)
        if recorded is not None:
            return recorded
        row = REGISTRY.of(event)
        fold = tenant.fold
        # Only a consolidation needs every member: a replacement takes whichever is held.
        replaced = row.replaced(event) if row.applies is Applies.CONSOLIDATE else ()
        missing = tuple(i for i in replaced if i not in fold.memories)
        conflict = row.applies is Applies.DOCUMENT and not fold.admits(row.changes(event))
        logged = Logged(event, position or _NOWHERE, datetime.now(UTC), event.id)
        touches = fold.apply(logged, (event.id, item.memories), bounds=self._bounds)
        if row.applies is Applies.ERASE:
            tenant.vectors.clear()
            tenant.facets.clear()
        by_id = {m.id: n for n, m in enumerate(item.memories)}
        for touch in touches:
            if touch.change in _WRITTEN:
                at = by_id[touch.memory_id]
                tenant.vectors[touch.memory_id] = item.vectors[at]
                facets = item.facets[at] if item.facets else None
                if facets is not None and len(facets):
                    tenant.facets[touch.memory_id] = facets
                else:
                    tenant.facets.pop(touch.memory_id, None)
            elif touch.removes:
                tenant.vectors.pop(touch.memory_id, None)
                tenant.facets.pop(touch.memory_id, None)
        skipped = ""
        if missing:  # a member is gone: the summary would speak for memories that are not
            skipped = "members_missing"
        elif conflict:  # a document is not what the event expected: none of it applies
            skipped = "conflict"
        elif row.applies is Applies.EXPIRE and not any(t.removes for t in touches):
            skipped = "item_renewed"
        outcome = AppliedOutcome(
            event=event,
            applied_now=True,
            memory_ids=tuple(t.memory_id for t in touches if t.change in _WRITTEN),
            evicted=tuple(t.memory_id for t in touches if t.change is Change.EVICTED),
            removed=tuple(
                t.memory_id for t in touches if t.removes and t.change is not Change.EVICTED
            ),
            skipped=skipped,
            missing=missing,
        )
        # What a redelivery gets back: the outcome as recorded, evictions not known then.
        tenant.outcomes[event.id] = dataclasses.replace(outcome, applied_now=False, evicted=())
        return outcome

    def _record_position(self, generation: int, position: Position) -> None:
        positions = self._state.generation(generation).positions
        if position.offset > positions.get(position.field, -1):
            positions[position.field] = position.offset

    async def advance(
        self,
        positions: Mapping[str, int],
        *,
        into: int | None = None,
        held: Mapping[str, int] | None = None,
    ) -> None:
        """Record offsets taken into account without applying anything; a position moves only
        where it shows the partition's `held` offset (the caller's last applied) is here."""
        with self._state.lock:
            generation = into if into is not None else self._state.live
            current = self._state.generation(generation).positions
            for name, offset in positions.items():
                now = current.get(name, -1)
                if offset > now and now >= (held or {}).get(name, -1):
                    current[name] = offset

    async def positions(self) -> dict[str, int]:
        with self._state.lock:
            return dict(self._state.generation(self._state.live).positions)

    async def known_vectors(self, memories: Sequence[Memory]) -> list[Vectors | None]:
        """The live generation's vectors of `memories`, where the stored memory has the same
        id, content and embedding model; None elsewhere."""
        with self._state.lock:
            live = self._state.live
            return [_known(self._state.held(live, m.tenant), m) for m in memories]


def _known(tenant: TenantState | None, memory: Memory) -> Vectors | None:
    if tenant is None:
        return None
    stored = tenant.fold.memories.get(memory.id)
    if stored is None or (stored.content, stored.embedding_model) != (
        memory.content,
        memory.embedding_model,
    ):
        return None
    return tenant.vectors.get(memory.id)
