"""The in-process memory store: one tenant's memories in a dict, searched by cosine similarity.

For unit tests and for embedding memstream without Kafka and Redis. It applies events with the
same pure function as the projection (`memories_of`), skips a consolidation whose group lost a
member, never writes a forgotten id again, and evicts in the same order (`bounds.over_bounds`).
It is not transactional: it keeps no applied markers, so the middleware refuses to replay a
write to it that a crash may have hidden.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from memstream.memory.bounds import Bounds, over_bounds
from memstream.memory.embeddings import Embedder
from memstream.memory.events import REGISTRY, Applies, MemoryEvent, Selection, memories_of
from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.provenance import provenance_of, with_provenance
from memstream.memory.store import MemoryFilter, WriteOutcome, check_tenant
from memstream.memory.tenancy import validate_tenant

__all__ = ["InProcessMemoryStore", "InProcessStores"]


class InProcessMemoryStore:
    transactional = False

    def __init__(self, tenant: str, embedder: Embedder, *, bounds: Bounds | None = None) -> None:
        self._tenant = validate_tenant(tenant)
        self._embedder = embedder
        self._bounds = bounds or Bounds()
        self._memories: dict[str, Memory] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._forgotten: set[str] = set()
        self._lock = threading.Lock()

    @property
    def tenant(self) -> str:
        return self._tenant

    @property
    def embedding_model(self) -> str:
        return self._embedder.model_id

    def search(self, query: str, *, k: int) -> list[RecalledMemory]:
        with self._lock:
            ids = list(self._memories)
            if not ids:
                return []
            matrix = np.stack([self._vectors[i] for i in ids])
        scores = matrix @ self._embedder.embed_query(query)
        best = np.argsort(-scores, kind="stable")[:k]
        return [RecalledMemory(self._memories[ids[i]], float(scores[i])) for i in best]

    def memories(self, where: MemoryFilter | None = None) -> list[Memory]:
        with self._lock:
            found = [m for m in self._memories.values() if where is None or where.matches(m)]
        return sorted(found, key=lambda m: (m.timestamp, m.id))

    def write(
        self, event: MemoryEvent, *, on_durable: Callable[[], None] | None = None
    ) -> WriteOutcome:
        check_tenant(event, self._tenant)
        written = with_provenance(memories_of(event), provenance_of(event))
        vectors = self._embedder.embed_documents([m.content for m in written])
        row = REGISTRY.of(event)
        with self._lock:
            if row.applies is Applies.ERASE:  # the whole tenant, tombstones included
                self._memories.clear()
                self._vectors.clear()
                self._forgotten.clear()
            elif row.applies is Applies.FORGET:
                self._forget(row.selection(event))
            elif row.applies is Applies.EXPIRE:
                lapse = row.lapse(event)
                held = self._memories.get(lapse.memory_id)
                if held is not None and lapse.ends(held):
                    del self._memories[held.id], self._vectors[held.id]
            elif row.applies is Applies.REPLACE:
                for gone in row.replaced(event):
                    if self._memories.pop(gone, None) is not None:
                        del self._vectors[gone]
            elif row.applies is Applies.CONSOLIDATE:
                replaced = row.replaced(event)
                if not all(i in self._memories for i in replaced):
                    written = ()  # a member is gone: the group is skipped whole
                for gone in replaced if written else ():
                    del self._memories[gone], self._vectors[gone]
            for memory, vector in zip(written, vectors, strict=False):
                if memory.id in self._forgotten:
                    continue
                self._memories[memory.id] = memory
                self._vectors[memory.id] = vector
            for evicted in over_bounds(self._memories.values(), self._bounds):
                del self._memories[evicted.id], self._vectors[evicted.id]
        if on_durable is not None:
            on_durable()
        return WriteOutcome(event.id, tuple(m.id for m in written))

    def _forget(self, chosen: Selection) -> None:
        for memory in list(self._memories.values()):
            if chosen.chooses(memory):
                del self._memories[memory.id], self._vectors[memory.id]
                self._forgotten.add(memory.id)
        self._forgotten.update(chosen.ids)


class InProcessStores:
    """Every tenant's in-process store, made on first write: the `stores` resolver a memory
    middleware takes, and the projection's read ports (`memory.ports.MemoryReader` and
    `Recaller`) over the same memories, as the Redis projection gives them to the
    event-sourced stores."""

    def __init__(self, embedder: Embedder, *, bounds: Bounds | None = None) -> None:
        self._embedder = embedder
        self._bounds = bounds or Bounds()
        self._stores: dict[str, InProcessMemoryStore] = {}
        self._lock = threading.Lock()

    def __call__(self, tenant: str) -> InProcessMemoryStore:
        with self._lock:
            if tenant not in self._stores:
                store = InProcessMemoryStore(tenant, self._embedder, bounds=self._bounds)
                self._stores[tenant] = store
            return self._stores[tenant]

    def memories(self, tenant: str, where: MemoryFilter | None = None) -> list[Memory]:
        store = self._existing(tenant)
        return store.memories(where) if store is not None else []

    def recall(self, tenant: str, text: str, k: int = 10) -> list[RecalledMemory]:
        store = self._existing(tenant)
        return store.search(text, k=k) if store is not None else []

    def _existing(self, tenant: str) -> InProcessMemoryStore | None:
        validate_tenant(tenant)  # a read names a tenant as carefully as a write
        with self._lock:
            return self._stores.get(tenant)
