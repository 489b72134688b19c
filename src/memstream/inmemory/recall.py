"""Recall and the filtered search over the in-memory projection, ranked by the domain's
`memory.ranking` as the Redis projection's are.

The candidates are found as Redis finds them (projections/recall.py): the memories holding any
word of the query (`query_terms` against `memory_words`: content and date words, unstemmed),
the best `CANDIDATES` of them by the tenant's BM25, and the `VECTOR_CANDIDATES` (at least k)
nearest by cosine; the tenant's BM25 statistics are counted over all its memories, whatever
passes a filter. `rank` then scores, fuses, collapses duplicates and cuts, so the same
memories rank alike on both backends (the scores too, up to which candidates each found).

The search's modes follow projections/search.py: keyword (BM25 matches, 1 / (1 + rank)),
semantic (cosine, or within `max_distance`), hybrid (recall filtered), and a listing, newest
first, when the text has no searchable word. Keyword matches are exact words here, where
Redis's keyword mode also matches stems.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from memstream.inmemory.live import LiveReads
from memstream.inmemory.state import Namespace, TenantState
from memstream.memory.embeddings import Embedders, Vectors
from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.ports import MAX_RECALL_K
from memstream.memory.ranking.fusion import RecallTuning
from memstream.memory.ranking.neighbours import neighbours_in
from memstream.memory.ranking.rank import (
    CANDIDATES,
    VECTOR_CANDIDATES,
    TermStats,
    rank,
    tenant_bm25,
)
from memstream.memory.ranking.tokens import memory_words, query_terms
from memstream.memory.search import SearchFilter, SearchMode, SearchPage, check_k, check_search
from memstream.memory.tenancy import TenantId, validate_tenant
from memstream.memory.validity import successors

__all__ = ["InMemoryRecaller", "InMemorySearch"]

Keep = Callable[[Memory], bool]


def _stats(memories: Sequence[Memory], terms: Sequence[str]) -> TermStats:
    words = [set(memory_words(m)) for m in memories]
    return TermStats(len(memories), tuple(sum(t in w for w in words) for t in terms))


def _worded(memories: Sequence[Memory], terms: Sequence[str], stats: TermStats) -> list[int]:
    """The rows of `memories` holding any of `terms`, best BM25 first (ties: in order)."""
    wanted = set(terms)
    rows = [row for row, m in enumerate(memories) if wanted & set(memory_words(m))]
    scores = tenant_bm25(terms, [memories[row] for row in rows], stats)
    order = sorted(range(len(rows)), key=lambda at: -scores[at])
    return [rows[at] for at in order]


def _recalled(
    held: TenantState | None,
    text: str,
    query: Vectors,
    k: int,
    tuning: RecallTuning,
    keep: Keep | None,
) -> list[RecalledMemory]:
    if held is None:
        return []
    every = list(held.fold.memories.values())
    found = [m for m in every if keep is None or keep(m)]
    if not found:
        return []
    vectors = np.stack([held.vectors[m.id] for m in found])
    nearest = np.argsort(-(vectors @ query), kind="stable")[: max(k, VECTOR_CANDIDATES)]
    rows = set(nearest.tolist())
    terms = query_terms(text)
    stats = _stats(every, terms) if terms else None
    if stats is not None:
        rows.update(_worded(found, terms, stats)[: max(k, CANDIDATES)])
    chosen = sorted(rows)

    def around(hits: Sequence[Memory], reach: int) -> dict[str, list[tuple[Memory, Vectors]]]:
        # Worked out only when neighbours are asked for.
        return neighbours_in(((m, held.vectors[m.id]) for m in every), hits, reach, keep)

    return rank(
        [found[r] for r in chosen], vectors[chosen], query, terms, stats, tuning, k, around,
        lambda facts: successors(every, facts), text=text,
    )  # fmt: skip


class InMemoryRecaller:
    """Recall over the live generation, each query embedded for its model; an unknown tenant
    recalls nothing."""

    def __init__(self, state: Namespace, embedders: Embedders, *, tuning: RecallTuning) -> None:
        self._live = LiveReads(state, embedders)
        self.tuning = tuning

    def recall(self, tenant: TenantId, text: str, k: int = 10) -> list[RecalledMemory]:
        return self.recall_where(validate_tenant(tenant), text, k)

    def recall_where(
        self,
        tenant: str,
        text: str,
        k: int,
        keep: Keep | None = None,
        vector_weight: float | None = None,
    ) -> list[RecalledMemory]:
        """Recall among the tenant's memories that `keep` lets through (with `vector_weight`:
        meaning weighed so in the fusion)."""
        check_k(k)
        tuning = self.tuning
        if vector_weight is not None:
            tuning = tuning.blended(vector_weight)
        return self._live.read(
            tenant, text, lambda held, query: _recalled(held, text, query, k, tuning, keep)
        )


class InMemorySearch:
    """The HTTP API's and MCP tools' filtered, paged search (`memory.search.MemorySearch`) of
    the live generation; its hybrid mode is `recaller`'s recall."""

    def __init__(self, state: Namespace, embedders: Embedders, recaller: InMemoryRecaller) -> None:
        self._state = state
        self._live = LiveReads(state, embedders)
        self._recaller = recaller

    def search(
        self,
        where: SearchFilter,
        text: str,
        *,
        mode: SearchMode = SearchMode.HYBRID,
        limit: int = 10,
        offset: int = 0,
        max_distance: float | None = None,
        keep: Keep | None = None,
        vector_weight: float | None = None,
        scorer: str | None = None,
    ) -> SearchPage:
        check_search(mode, limit, offset, max_distance, scorer)
        filtered = where.matches
        kept = filtered if keep is None else (lambda m: filtered(m) and keep(m))
        terms = query_terms(text)
        if mode == SearchMode.HYBRID and (terms or text.strip()):
            depth = MAX_RECALL_K if keep is not None else offset + limit
            # Counted before the recall, as Redis's search counts: an apply in between raises
            # the hits, never the count alone.
            counted = 0 if keep is not None else self._count(where)
            hits = self._recaller.recall_where(where.tenant, text, depth, kept, vector_weight)
            total = len(hits) if keep is not None else max(counted, len(hits))
            return SearchPage(tuple(hits[offset : offset + limit]), total)
        if not terms and (mode == SearchMode.KEYWORD or not text.strip()):
            found = self._listing(where.tenant, kept)
        elif mode == SearchMode.KEYWORD:
            found = self._keyword(where.tenant, terms, kept)
        else:
            found = self._semantic(where.tenant, text, kept, max_distance)
        return SearchPage(tuple(found[offset : offset + limit]), len(found))

    def _memories(self, tenant: str, keep: Keep) -> list[Memory]:
        with self._state.lock:
            held = self._state.held(self._state.live, tenant)
            return [m for m in held.fold.memories.values() if keep(m)] if held is not None else []

    def _count(self, where: SearchFilter) -> int:
        return len(self._memories(where.tenant, where.matches))

    def _listing(self, tenant: str, keep: Keep) -> list[RecalledMemory]:
        newest = sorted(self._memories(tenant, keep), key=lambda m: m.timestamp, reverse=True)
        return _by_rank(newest)

    def _keyword(self, tenant: str, terms: Sequence[str], keep: Keep) -> list[RecalledMemory]:
        every = self._memories(tenant, lambda m: True)
        found = [m for m in every if keep(m)]
        return _by_rank([found[row] for row in _worded(found, terms, _stats(every, terms))])

    def _semantic(
        self, tenant: str, text: str, keep: Keep, max_distance: float | None
    ) -> list[RecalledMemory]:
        def near(held: TenantState | None, query: Vectors) -> list[RecalledMemory]:
            found = [m for m in held.fold.memories.values() if keep(m)] if held else []
            if held is None or not found:
                return []
            cosines = np.stack([held.vectors[m.id] for m in found]) @ query
            order = np.argsort(-cosines, kind="stable")
            return [
                RecalledMemory(found[row], max(0.0, float(cosines[row])))
                for row in order.tolist()
                if max_distance is None or 1.0 - float(cosines[row]) <= max_distance
            ]

        return self._live.read(tenant, text, near)


def _by_rank(memories: Sequence[Memory]) -> list[RecalledMemory]:
    return [RecalledMemory(m, 1.0 / (1 + at)) for at, m in enumerate(memories)]
