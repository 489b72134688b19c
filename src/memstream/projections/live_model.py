"""Which embedder a query needs: the model the live generation's vectors are of.

Each generation of the projection records the model it was built with (the worker and replay
choose it, never an event), and a query vector is only comparable with vectors of its own
model. A reader (recall, the server's search) therefore embeds with the live generation's
model, found on first use, and reads the live generation again in the same transaction as
each search: when a replay has swapped in a generation of another model since, the query is
embedded for that one and searched again, so no answer ever compares two models' vectors.
The query travels in the type the generation stores its vectors in (`VectorType`), learnt
with the model: a swap to a generation of another type searches again too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from memstream.memory.embeddings import Embedder, Embedders, Vectors
from memstream.projections.connection import is_missing_index, redis_errors, text
from memstream.projections.schema import Keyspace, VectorType

__all__ = ["LiveModel"]

# A swap to another model between a query's embedding and its search is rare; two in a row
# are not worth more tries than this.
_TRIES = 3


@dataclass(frozen=True, slots=True)
class _Encoding:
    """How a generation's queries are made: its model's embedder, its vectors' type."""

    embedder: Embedder
    vector_type: VectorType

    def same_as(self, other: _Encoding) -> bool:
        return (self.embedder.model_id, self.vector_type) == (
            other.embedder.model_id,
            other.vector_type,
        )


class LiveModel:
    def __init__(
        self, client: redis.Redis, keyspace: Keyspace, embedders: Embedders, *, url: str = ""
    ) -> None:
        self._client = client
        self._keys = keyspace
        self._embedders = embedders
        self._url = url
        self._known: tuple[int, _Encoding] | None = None

    def current(self, doing: str = "reading the live generation's model") -> tuple[int, Embedder]:
        """The live generation as last seen, and the embedder of its model (read from Redis on
        first use). A ConfigurationError says this process cannot make that model's vectors,
        and what to do; a process calls it at start to fail there rather than at a turn."""
        generation, encoding = self._current(doing)
        return generation, encoding.embedder

    def cast(self, vector: Vectors) -> Vectors:
        """A query vector embedded by the caller, in the live generation's vector type."""
        _, encoding = self._current("reading the live generation's vector type")
        return encoding.vector_type.cast(vector)

    def search(
        self, query: str, commands: Callable[[Vectors], Sequence[Sequence[Any]]], *, doing: str
    ) -> tuple[Vectors, list[object] | None]:
        """The replies of the search `commands(vector)`, run in one transaction with a read of
        the live generation, where `vector` is `query` embedded for the model of the generation
        they ran on, in its vector type; None when the index does not exist yet. Returns the
        vector too."""
        generation, encoding = self._current(doing)
        for tried in range(1, _TRIES + 1):
            vector = encoding.vector_type.cast(encoding.embedder.embed_query(query))
            try:
                seen, replies = self._pinned(commands(vector), doing)
            except redis.ResponseError as exc:
                # The type was taken before the index existed, and the index was made since
                # (or the namespace was dropped and made again): learn it again.
                if not _wrong_type(exc) or tried == _TRIES:
                    raise
                self._known = None
                generation, encoding = self._current(doing)
                continue
            if seen == generation:
                break
            following = self._encoding_of(seen, doing)
            if following is not None:
                self._known = (seen, following)
            if following is None or following.same_as(encoding):
                break
            generation, encoding = seen, following
        return vector, replies

    def _current(self, doing: str) -> tuple[int, _Encoding]:
        if self._known is not None:
            return self._known
        with redis_errors(self._url, doing):
            raw = self._client.get(self._keys.generation_key)
        generation = int(raw or 1)
        encoding = self._encoding_of(generation, doing)
        if encoding is None:
            # No index yet: the worker will build it with the configured model; a search finds
            # nothing whatever the query's type, and the generation's is read again next time.
            return generation, _Encoding(
                self._embedders.for_model(self._embedders.configured_model), VectorType.FLOAT32
            )
        self._known = (generation, encoding)
        return self._known

    def _encoding_of(self, generation: int, doing: str) -> _Encoding | None:
        """How `generation`'s queries are made; None before its index exists."""
        with redis_errors(self._url, doing):
            raw_model, raw_type = self._client.hmget(
                self._keys.at(generation).meta, ["embedding_model", "vector_type"]
            )
        if raw_model is None:
            return None
        # A generation built before the type was chosen stores float32.
        vector_type = VectorType(text(raw_type)) if raw_type is not None else VectorType.FLOAT32
        return _Encoding(self._embedders.for_model(text(raw_model)), vector_type)

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


def _wrong_type(exc: redis.ResponseError) -> bool:
    """Whether the search module refused a query vector of another type than its index's."""
    return "blob size" in str(exc).lower()
