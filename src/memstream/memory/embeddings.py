"""The embedding seam: what the projection and recall need from a sentence-embedding model.

Providers (memstream.providers) implement it; the domain only knows this protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "Vectors"]

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length float32 vectors.

    `model_id` names the model and its version; it is carried in every event and kept with the
    index, because vectors of two models are not comparable.
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
