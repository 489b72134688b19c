"""Plain retrieval baselines computed in-process, and evidence recall@k to score any ranking.

- `BM25`: Okapi BM25 (k1 = 1.2, b = 0.75, Lucene's idf) over the same word tokens memstream
  queries with (`projections.recall.word_tokens`), without stemming;
- `cosine_ranking`: exact cosine similarity of one query vector against a matrix of unit
  document vectors (numpy), i.e. a flat vector search with no index;
- `RecallAtK`: the mean over questions of the share of each question's evidence found in the
  top k.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from memstream.errors import InvalidInputError
from memstream.memory.embeddings import Vectors
from memstream.projections.recall import word_tokens

__all__ = ["BM25", "RecallAtK", "cosine_ranking"]

KS = (1, 5, 10)


class BM25:
    """An in-memory BM25 index over a fixed list of documents; `rank` returns indices."""

    def __init__(self, documents: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self._k1, self._b = k1, b
        self._counts = [Counter(word_tokens(doc)) for doc in documents]
        self._lengths = [sum(c.values()) for c in self._counts]
        self._average = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        frequency: Counter[str] = Counter()
        for counts in self._counts:
            frequency.update(counts.keys())
        n = len(documents)
        self._idf = {t: math.log(1 + (n - df + 0.5) / (df + 0.5)) for t, df in frequency.items()}

    def scores(self, query: str) -> list[float]:
        terms = set(word_tokens(query))
        scores = []
        for counts, length in zip(self._counts, self._lengths, strict=True):
            norm = self._k1 * (1 - self._b + self._b * length / (self._average or 1))
            score = 0.0
            for term in terms & counts.keys():
                tf = counts[term]
                score += self._idf[term] * tf * (self._k1 + 1) / (tf + norm)
            scores.append(score)
        return scores

    def rank(self, query: str, k: int) -> list[int]:
        """Indices of the best `k` documents with a positive score, best first (ties: index)."""
        scored = [(s, i) for i, s in enumerate(self.scores(query)) if s > 0]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [i for _, i in scored[:k]]


def cosine_ranking(documents: Vectors, query: Vectors, k: int) -> list[int]:
    """Indices of the `k` documents most similar to `query` (unit vectors), best first."""
    if len(documents) == 0:
        return []
    similarity = documents @ np.asarray(query, dtype=np.float32)
    k = min(k, len(similarity))
    top = np.argpartition(-similarity, k - 1)[:k]
    return [int(i) for i in top[np.argsort(-similarity[top], kind="stable")]]


@dataclass(slots=True)
class RecallAtK:
    """Evidence recall@k accumulated over questions."""

    ks: tuple[int, ...] = KS
    _sums: dict[int, float] = field(default_factory=dict)
    questions: int = 0

    def add(self, ranked: Sequence[str], evidence: Iterable[str]) -> None:
        wanted = set(evidence)
        if not wanted:
            raise InvalidInputError("a question without evidence cannot be scored")
        self.questions += 1
        for k in self.ks:
            found = len(wanted & set(ranked[:k]))
            self._sums[k] = self._sums.get(k, 0.0) + found / len(wanted)

    def as_json(self) -> dict[str, float]:
        return {
            f"recall@{k}": round(self._sums.get(k, 0.0) / self.questions, 4)
            if self.questions
            else 0.0
            for k in self.ks
        }
