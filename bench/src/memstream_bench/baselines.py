"""Plain retrieval baselines computed in-process, and evidence recall@k to score any ranking.

- `BM25`: Okapi BM25 (`memory.ranking.bm25`: k1 = 1.2, b = 0.75, Lucene's idf) over the same
  word tokens memstream queries with (`memory.ranking.tokens.word_tokens`), without stemming;
- `cosine_ranking`: exact cosine similarity of one query vector against a matrix of unit
  document vectors (numpy), i.e. a flat vector search with no index;
- `RecallAtK`: the mean over questions of the share of each question's evidence found in the
  top k (`recall@k`), and the share of questions with any evidence in the top k (`hit@k`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from memstream.errors import InvalidInputError
from memstream.memory.embeddings import Vectors
from memstream.memory.ranking.bm25 import idf, okapi
from memstream.memory.ranking.tokens import word_tokens

__all__ = ["BM25", "RecallAtK", "cosine_ranking"]

KS = (1, 5, 10)


class BM25:
    """An in-memory BM25 index over a fixed list of documents; `rank` returns indices."""

    def __init__(self, documents: Sequence[str]) -> None:
        self._counts = [Counter(word_tokens(doc)) for doc in documents]
        self._lengths = [sum(c.values()) for c in self._counts]
        self._average = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        frequency: Counter[str] = Counter()
        for counts in self._counts:
            frequency.update(counts.keys())
        n = len(documents)
        self._idf = {t: idf(n, df) for t, df in frequency.items()}

    def scores(self, query: str) -> list[float]:
        terms = set(word_tokens(query))
        return [
            okapi(terms, counts, length, self._idf, self._average)
            for counts, length in zip(self._counts, self._lengths, strict=True)
        ]

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
    """Evidence recall@k accumulated over questions, at the level of dialogue turns and, where
    the turns' sessions are given, of sessions: an evidence session counts as found at k when
    any of its evidence turns is in the top k (the level many published LoCoMo figures use)."""

    ks: tuple[int, ...] = KS
    session_ks: tuple[int, ...] = (5, 10)
    _sums: dict[int, float] = field(default_factory=dict)
    _hits: dict[int, int] = field(default_factory=dict)
    _session_sums: dict[int, float] = field(default_factory=dict)
    questions: int = 0

    def add(
        self,
        ranked: Sequence[str],
        evidence: Iterable[str],
        sessions: Mapping[str, str] | None = None,
    ) -> None:
        wanted = set(evidence)
        if not wanted:
            raise InvalidInputError("a question without evidence cannot be scored")
        self.questions += 1
        for k in self.ks:
            found = len(wanted & set(ranked[:k]))
            self._sums[k] = self._sums.get(k, 0.0) + found / len(wanted)
            self._hits[k] = self._hits.get(k, 0) + (found > 0)
        if sessions is None:
            return
        wanted_sessions = {sessions[e] for e in wanted}
        for k in self.session_ks:
            found_sessions = {sessions[e] for e in wanted & set(ranked[:k])}
            share = len(found_sessions) / len(wanted_sessions)
            self._session_sums[k] = self._session_sums.get(k, 0.0) + share

    def as_json(self) -> dict[str, float]:
        n = self.questions or 1
        return {
            **{f"recall@{k}": round(self._sums.get(k, 0.0) / n, 4) for k in self.ks},
            **{f"hit@{k}": round(self._hits.get(k, 0) / n, 4) for k in self.ks},
            **{
                f"session_recall@{k}": round(self._session_sums[k] / n, 4)
                for k in self.session_ks
                if k in self._session_sums
            },
        }
