"""A deterministic bag-of-words embedder: a test double for the embedding model only."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np


class WordEmbedder:
    model_id = "test-words@1"
    dims = 64

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.embed_query(t) for t in texts]) if texts else np.empty((0, 64))

    def embed_query(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dims, dtype=np.float32)
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dims] += 1.0
        norm = np.linalg.norm(vector)
        return vector / norm if norm else vector
