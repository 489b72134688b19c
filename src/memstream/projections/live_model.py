"""Which embedder a query needs: the model the live generation's vectors are of.

Each generation of the projection records the model it was built with (the worker and replay
choose it, never an event), and a query vector is only comparable with vectors of its own
model. A reader (recall, the server's search) therefore embeds with the live generation's
model, found on first use, and reads the live generation again in the same transaction as
each search: when a replay has swapped in a generation of another model since, the query is
embedded for that one and searched again, so no answer ever compares two models' vectors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis

from memstream.memory.embeddings import Embedder, Embedders, Vectors
from memstream.projections.connection import is_missing_index, redis_errors, text
from memstream.projections.schema import Keyspace

__all__ = ["LiveModel"]

# A swap to another model between a query's embedding and its search is rare; two in a row
# are not worth more tries than this.
_TRIES = 3


class LiveModel:
    def __init__(
        self, client: redis.Redis, keyspace: Keyspace, embedders: Embedders, *, url: str = ""
    ) -> None:
        self._client = client
        self._keys = keyspace
        self._embedders = embedders
        self._url = url
        self._known: tuple[int, Embedder] | None = None

    def current(self, doing: str = "reading the live generation's model") -> tuple[int, Embedder]:
        """The live generation as last seen, and the embedder of its model (read from Redis on
        first use). A ConfigurationError says this process cannot make that model's vectors,
        and what to do; a process calls it at start to fail there rather than at a turn."""
        if self._known is None:
            with redis_errors(self._url, doing):
                raw = self._client.get(self._keys.generation_key)
            generation = int(raw or 1)
            self._known = (generation, self._embedder_of(generation, doing))
        return self._known

    def search(
        self, query: str, commands: Callable[[Vectors], Sequence[Sequence[Any]]], *, doing: str
    ) -> tuple[Vectors, list[object] | None]:
        """The replies of the search `commands(vector)`, run in one transaction with a read of
        the live generation, where `vector` is `query` embedded for the model of the generation
        they ran on; None when the index does not exist yet. Returns the vector too."""
        generation, embedder = self.current(doing)
        for _ in range(_TRIES):
            vector = embedder.embed_query(query)
            seen, replies = self._pinned(commands(vector), doing)
            if seen == generation:
                break
            following = self._embedder_of(seen, doing)
            self._known = (seen, following)
            if following.model_id == embedder.model_id:
                break
            generation, embedder = seen, following
        return vector, replies

    def _embedder_of(self, generation: int, doing: str) -> Embedder:
        with redis_errors(self._url, doing):
            raw = self._client.hget(self._keys.at(generation).meta, "embedding_model")
        # No index yet: the worker will build it with the configured model.
        model = text(raw) if raw is not None else self._embedders.configured_model
        return self._embedders.for_model(model)

    def _pinned(
        self, commands: Sequence[Sequence[Any]], doing: str
    ) -> tuple[int, list[object] | None]:
        with redis_errors(self._url, doing):
            pipe = self._client.pipeline(transaction=True)
            pipe.get(self._keys.generation_key)
            for command in commands:
                pipe.execute_command(*command)  # type: ignore[no-untyped-call]
            generation, *replies = pipe.execute(raise_on_error=False)
            for reply in replies:
                if isinstance(reply, redis.ResponseError):
                    if is_missing_index(reply):
                        return int(generation or 1), None
                    raise reply
        return int(generation or 1), replies
