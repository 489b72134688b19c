"""Reading the live generation with a query embedded for its model, as the Redis projection's
`LiveModel` does: the query is embedded outside the lock (a model is slow), and the read runs
once the live generation is seen, under the lock, still to be of the model embedded for (a
swap to another model in between embeds again)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from memstream.inmemory.state import Namespace, TenantState
from memstream.memory.embeddings import Embedders, Vectors

__all__ = ["LiveReads"]

T = TypeVar("T")

# A swap to another model between a query's embedding and its read is rare; two in a row are
# not worth more tries than this.
_TRIES = 3


class LiveReads:
    def __init__(self, state: Namespace, embedders: Embedders) -> None:
        self._state = state
        self._embedders = embedders

    def model(self) -> str:
        """The live generation's model (the configured one, before any index)."""
        with self._state.lock:
            held = self._state.generations.get(self._state.live)
            found = held.model if held is not None else None
        return found or self._embedders.configured_model

    def read(self, tenant: str, text: str, read: Callable[[TenantState | None, Vectors], T]) -> T:
        """`read(the tenant's live state, text's vector)`, under the lock."""
        model = self.model()
        for _ in range(_TRIES - 1):
            vector = self._embedders.for_model(model).embed_query(text)
            with self._state.lock:
                now = self.model()
                if now == model:
                    return read(self._state.held(self._state.live, tenant), vector)
            model = now
        vector = self._embedders.for_model(model).embed_query(text)
        with self._state.lock:
            return read(self._state.held(self._state.live, tenant), vector)
