"""The embedding seam: what the projection and recall need from a sentence-embedding model.

Providers (memstream.providers) implement it; the domain only knows these protocols. Which
model a memory's vector is of is the projection's business, never an event's: each generation
of the projection records the model it was built with, writers and readers ask `Embedders`
for that model, and a new generation is built with the configured one (a model switch is a
replay into a new generation, docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "Embedders", "Vectors", "cosines"]

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length float32 vectors.

    `model_id` names the model and its version; it is kept with each generation of the index,
    because vectors of two models are not comparable.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dims(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One row per text, in order; texts to be stored."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """A single vector for a search query."""
        ...


class Embedders(Protocol):
    """The embedders this process can use, by model id: `configured` is the one the settings
    name (new generations are built with it); `for_model` gives the one whose vectors a
    generation holds, or raises ConfigurationError saying why this process cannot make them
    and what fixes it."""

    @property
    def configured_model(self) -> str:
        """The configured model's id, without loading it."""
        ...

    def configured(self) -> Embedder: ...

    def for_model(self, model_id: str) -> Embedder: ...


def cosines(matrix: Vectors, query: Vectors) -> Vectors:
    """The cosine similarity of `query` to each row of `matrix` (0 where either is all
    zeros: a memory stored without text has a zero vector)."""
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
    with np.errstate(divide="ignore", invalid="ignore"):
        found = (matrix @ np.asarray(query, dtype=np.float32)) / norms
    return cast(Vectors, np.nan_to_num(found, nan=0.0))
