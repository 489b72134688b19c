"""The view of a tenant's store that the manager gets for one hook call.

Reads go to the store under the tenant's lock. Every write is one journaled effect of the run,
keyed by the event's id (which is derived from the effect key: `memory.record` for a turn,
`memory.consolidate` for a group), so a recovered run never writes twice:

- on a transactional store, a write that may have run is written again (the store applies
  each event id once), and the effect counts as applied only once the write is durable;
- on any other store, a write that may have run is refused (EffectRefusedError).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memstream.agent.context import RunContext
from memstream.agent.journal import EffectRecord
from memstream.hooks.tenants import TenantCell
from memstream.memory.events import REGISTRY, MemoryEvent, memory_ids_of
from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.store import MemoryFilter, MemoryStore, WriteOutcome

__all__ = ["EffectView", "effect_name"]


def effect_name(event: MemoryEvent) -> str:
    """The journal name of the effect that writes `event` (its registry row says)."""
    return REGISTRY.of(event).effect


class EffectView:
    def __init__(self, store: MemoryStore, cell: TenantCell, context: RunContext) -> None:
        self._store = store
        self._cell = cell
        self._context = context

    @property
    def tenant(self) -> str:
        return self._store.tenant

    @property
    def embedding_model(self) -> str:
        return self._store.embedding_model

    @property
    def transactional(self) -> bool:
        return self._store.transactional

    def search(self, query: str, *, k: int) -> list[RecalledMemory]:
        with self._cell.lock:
            return self._store.search(query, k=k)

    def memories(self, where: MemoryFilter | None = None) -> list[Memory]:
        with self._cell.lock:
            return self._store.memories(where)

    def write(
        self, event: MemoryEvent, *, on_durable: Callable[[], None] | None = None
    ) -> WriteOutcome:
        name = effect_name(event)
        if not self._store.transactional:
            return self._context.effect(
                name,
                event.id,
                lambda: self._locked_write(event, on_durable),
                encode=_encode,
                decode=_decode,
            )
        begun = self._context.begin_effect(name, event.id, replay_safe=True)
        if isinstance(begun, EffectRecord):
            return _decode(begun.outcome)

        # The outcome follows from the event alone, so it is worked out and recorded by the
        # callback that fires when the write is durable, whenever (and on whichever thread)
        # that is: not on the turn's path.
        def durable() -> None:
            begun.applied(_encode(WriteOutcome(event.id, memory_ids_of(event))))
            if on_durable is not None:
                on_durable()

        return self._locked_write(event, durable)

    def _locked_write(
        self, event: MemoryEvent, on_durable: Callable[[], None] | None
    ) -> WriteOutcome:
        with self._cell.lock:
            return self._store.write(event, on_durable=on_durable)


def _encode(outcome: WriteOutcome) -> dict[str, Any]:
    return {"event_id": outcome.event_id, "memory_ids": list(outcome.memory_ids)}


def _decode(data: Any) -> WriteOutcome:
    return WriteOutcome(data["event_id"], tuple(data["memory_ids"]))
