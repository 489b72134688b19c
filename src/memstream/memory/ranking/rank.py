"""One ranking of a recall's candidates: each scored by the tenant's BM25 and its cosine with
the query, fused with importance and recency (`fusion.fuse`), the best hits' thread neighbours
lifted by them (`neighbours`; a question's answer most), questions weighed down
(`questions`), facts that do not hold at the moment asked about ranked down
(`memory.validity`), near-duplicates collapsed (`dedup`), the best few read again with the
query by a reranker (`rerank`), cut to k. The middleware's
recall, the HTTP search and the MCP tools all rank here; a backend's filters only decide which
candidates (and neighbours) arrive."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from memstream.memory.embeddings import Vectors
from memstream.memory.model import Memory, RecalledMemory, ScoreParts
from memstream.memory.ranking.bm25 import RECALL_B, RECALL_K1, idf, okapi
from memstream.memory.ranking.dedup import collapse_duplicates
from memstream.memory.ranking.fusion import Candidate, RecallTuning, fuse
from memstream.memory.ranking.neighbours import Around, lend, lenders, questions_answered
from memstream.memory.ranking.questions import weigh_questions
from memstream.memory.ranking.rerank import rerank
from memstream.memory.ranking.tokens import memory_words
from memstream.memory.validity import (
    SUPERSEDED_WEIGHT,
    Succession,
    holds_at,
    judged,
    subject_key,
)

__all__ = ["CANDIDATES", "VECTOR_CANDIDATES", "TermStats", "rank", "tenant_bm25"]

# Each list contributes this many candidates (at least k) to the fusion. Score fusion, unlike
# the rank fusion it replaced, is not hurt by depth; the lexical list must be deep enough that
# rescoring it with the tenant's BM25 finds what a full per-tenant BM25 ranks first: measured
# on the LoCoMo dev split, 50 candidates rescored equal the reference BM25 (docs/benchmarks.md).
CANDIDATES = 50
# The vector list can be shallower: every lexical candidate gets its exact cosine anyway, and
# on the dev split 20 and 50 vector candidates gave the same rankings (docs/benchmarks.md);
# its reply carries a vector per hit, so depth is what it costs.
VECTOR_CANDIDATES = 20


@dataclass(frozen=True, slots=True)
class TermStats:
    """The tenant's counts for BM25: its memories, and how many of them hold each query term
    (`frequencies`, in the order of the terms)."""

    documents: int
    frequencies: tuple[int, ...]


def tenant_bm25(terms: Sequence[str], memories: Sequence[Memory], stats: TermStats) -> list[float]:
    """BM25 of each memory over the tenant's statistics.

    The tenant's average memory length is not counted by the backend (it would scan every
    memory of the tenant); the candidates' average stands in for it, which moved LoCoMo's
    recall by under half a point against the exact average.
    """
    idfs = {
        term: idf(stats.documents, frequency)
        for term, frequency in zip(terms, stats.frequencies, strict=True)
    }
    tokens = [Counter(memory_words(m)) for m in memories]
    lengths = [sum(c.values()) for c in tokens]
    average = sum(lengths) / len(lengths) if lengths else 0.0
    distinct = set(terms)
    return [
        okapi(distinct, c, n, idfs, average, k1=RECALL_K1, b=RECALL_B)
        for c, n in zip(tokens, lengths, strict=True)
    ]


def rank(
    memories: Sequence[Memory],
    vectors: Vectors,
    query: Vectors,
    terms: Sequence[str],
    stats: TermStats | None,
    tuning: RecallTuning,
    k: int,
    around: Around | None = None,
    succession: Succession | None = None,
    valid_at: datetime | None = None,
    text: str = "",
) -> list[RecalledMemory]:
    """The best `k` of `memories` (one row of `vectors` each) for the query's vector and terms,
    best first; score in 0..1 (`fusion.fuse`). `stats` None: no lexical score (a query without
    a searchable word). `around`: the backend's reader of thread neighbours, which the best
    hits lend to (`neighbours`; None, or a share or reach of 0: none). `succession`: the
    backend's reader of when facts were superseded; what does not hold at `valid_at` (None:
    now) ranks lower (`memory.validity`; None: not judged). `text`: the query as asked, which
    the tuning's reranker reads with the best few (empty: none is read again)."""
    if not memories:
        return []
    # One matrix product gives every candidate's cosine, whichever search found it.
    cosines = vectors @ np.asarray(query, dtype=np.float32)
    lexical = tenant_bm25(terms, memories, stats) if stats is not None else None
    candidates = [
        Candidate(
            memory,
            lexical=lexical[i] if lexical is not None else 0.0,
            cosine=float(cosines[i]),
            vector=vectors[i],
        )
        for i, memory in enumerate(memories)
    ]
    fused = fuse(candidates, tuning)
    until: Mapping[str, datetime] = {}
    at = valid_at or datetime.now(UTC)
    facts = [m for m in memories if subject_key(m) is not None]
    if succession is not None and facts:
        until = succession(facts)
        fused = judged(fused, lambda c: c.memory, until, at)
    answered: Mapping[str, Memory] = {}
    lending = max(tuning.neighbour_share, tuning.answer_share) > 0
    if around is not None and lending and tuning.neighbour_reach > 0:
        hits = lenders(fused)
        if hits:
            near = around(hits, tuning.neighbour_reach)
            fused = lend(fused, near, query, tuning.neighbour_share, tuning.answer_share)
            answered = questions_answered(hits, near)
    if tuning.question_weight < 1:
        fused = weigh_questions(fused, tuning.question_weight)
    # Deep enough for the reranker whatever k is, so a query's first hit does not depend on k.
    kept = collapse_duplicates(fused, tuning.duplicate_similarity, max(k, tuning.rerank_depth))

    def keeps(memory: Memory) -> float:
        """What of the reranker's relevance a fact that no longer holds keeps: as of its score."""
        return 1.0 if holds_at(memory, until.get(memory.id), at) else SUPERSEDED_WEIGHT

    kept = rerank(kept, text, tuning.reranker, tuning.rerank_depth, answered, keeps)[:k]
    best = max(c.lexical for c in candidates) or 1.0
    return [
        RecalledMemory(
            c.memory, score, until.get(c.memory.id), ScoreParts(c.lexical / best, c.cosine)
        )
        for c, score in kept
    ]
