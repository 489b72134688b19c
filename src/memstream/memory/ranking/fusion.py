"""Fusion: one ranking of recall candidates from their word and meaning scores.

`fuse` is recall's fusion. Every candidate carries its BM25 over the tenant (`ranking.bm25`)
and its cosine with the query, whichever search found it, and scores

    fused = (bm25 / best bm25 among the candidates + a * max(cosine, 0)) / (1 + a)

then, where importance and recency weigh in (weights wi and wr, 0 by default),

    score = (1 - wi - wr) * fused + wi * importance + wr * recency

where recency is 0.5 ** (days behind the newest candidate / half-life). Every part lies in
0..1, so `score` does: 1.0 is the best word match among the candidates that is also identical
in meaning (and, if weighted, of full importance and the newest). It orders one query's
results; it is not comparable across queries.

Why scores and not ranks: reciprocal rank fusion (kept below for the bench's baseline) flattens
the head of each list, so a memory BM25 ranks first by far loses to one both lists rank
fairly high. On LoCoMo's dev split, RRF of BM25 and bge-small lost 2-4 points of recall@1 to
BM25 alone; score fusion keeps BM25's head and adds the vector's reach (docs/benchmarks.md).
BM25 is divided by its best candidate because its scale changes with the query's length and
the tenant's words; the cosine is used as it is, because its scale is the model's and the same
for every query (minmax over a short candidate list made the weight depend on the list).
`a` (MEMSTREAM_RECALL_VECTOR_WEIGHT) was chosen on four of the seven dev conversations.

Reciprocal rank fusion: each item scores the sum over the rankings that contain it of
1 / (k + rank), rank counted from 1 (Cormack, Clarke and Büttcher, SIGIR 2009).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, TypeVar

from memstream.errors import InvalidInputError
from memstream.memory.embeddings import Vectors
from memstream.memory.model import Memory

if TYPE_CHECKING:  # ranking.rerank reads candidates of this module
    from memstream.memory.ranking.rerank import Reranker

__all__ = ["RRF_K", "Candidate", "RecallTuning", "fuse", "reciprocal_rank_fusion"]

RRF_K = 60
_DAY_S = 86_400.0

H = TypeVar("H", bound=Hashable)


@dataclass(frozen=True, slots=True)
class RecallTuning:
    """The knobs of recall's ranking. Their defaults are declared once, with the settings
    (MEMSTREAM_RECALL_*); `Deployment.recall_tuning` reads them from the configuration."""

    vector_weight: float
    importance_weight: float
    recency_weight: float
    recency_half_life_days: float
    duplicate_similarity: float
    # What a top hit lends its thread neighbours, and how far (ranking.neighbours); 0: off.
    neighbour_share: float
    neighbour_reach: int
    # What a top hit that asks hands the turn after it, its answer (ranking.neighbours; 0: no
    # more than any neighbour's share), and what a memory that asks keeps of its own score
    # (ranking.questions; 1: as much as any other).
    answer_share: float
    question_weight: float
    # A second reading of the top `rerank_depth` by `reranker`, which orders them
    # (ranking.rerank; depth 0 or no reranker: none).
    rerank_depth: int = 0
    reranker: Reranker | None = None

    def blended(self, vector_weight: float) -> RecallTuning:
        """The tuning of a search that asks for its own blend of meaning and words (AMS's
        `hybrid_alpha`): that weight, and no reranker, as the caller's blend orders it."""
        return replace(self, vector_weight=vector_weight, rerank_depth=0)

    def described(self) -> dict[str, float | str | None]:
        """The knobs as a report shows them: numbers, the reranker by its model id."""
        knobs: dict[str, float | str | None] = {
            f.name: getattr(self, f.name) for f in fields(self) if f.name != "reranker"
        }
        return knobs | {"reranker": self.reranker.model_id if self.reranker else None}

    def __post_init__(self) -> None:
        if self.vector_weight < 0:
            raise InvalidInputError(
                f"the vector weight must be 0 or more, got {self.vector_weight}"
            )
        if not (self.importance_weight >= 0 and self.recency_weight >= 0) or (
            self.importance_weight + self.recency_weight > 1
        ):
            raise InvalidInputError(
                "the importance and recency weights must each be 0 or more and sum to at most "
                f"1, got {self.importance_weight} and {self.recency_weight}"
            )
        if not 0 <= self.neighbour_share <= 1 or self.neighbour_reach < 0:
            raise InvalidInputError(
                "the neighbour share must be between 0 and 1 and the reach 0 or more, got "
                f"{self.neighbour_share} and {self.neighbour_reach}"
            )
        if not (0 <= self.answer_share <= 1 and 0 <= self.question_weight <= 1):
            raise InvalidInputError(
                "the answer share and the question weight must each be between 0 and 1, got "
                f"{self.answer_share} and {self.question_weight}"
            )
        if self.rerank_depth < 0:
            raise InvalidInputError(f"the rerank depth must be 0 or more, got {self.rerank_depth}")
        if self.recency_half_life_days <= 0:
            raise InvalidInputError(
                f"the recency half-life must be positive, got {self.recency_half_life_days} days"
            )


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory one of recall's searches found, with both of its scores and its vector."""

    memory: Memory
    lexical: float
    cosine: float
    vector: Vectors


def fuse(candidates: Sequence[Candidate], tuning: RecallTuning) -> list[tuple[Candidate, float]]:
    """(candidate, score in 0..1) best first; ties keep the candidates' order."""
    if not candidates:
        return []
    best = max(c.lexical for c in candidates) or 1.0
    a = tuning.vector_weight
    newest = max(c.memory.timestamp.timestamp() for c in candidates)
    keep = 1.0 - tuning.importance_weight - tuning.recency_weight
    scored = []
    for c in candidates:
        fused = (c.lexical / best + a * max(c.cosine, 0.0)) / (1.0 + a)
        behind_days = (newest - c.memory.timestamp.timestamp()) / _DAY_S
        recency = 0.5 ** (behind_days / tuning.recency_half_life_days)
        score = (
            keep * fused
            + tuning.importance_weight * c.memory.importance
            + tuning.recency_weight * recency
        )
        scored.append((c, min(max(score, 0.0), 1.0)))
    return sorted(scored, key=lambda pair: -pair[1])


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[H]], k: int = RRF_K
) -> list[tuple[H, float]]:
    """(item, fused score) best first; ties keep the order in which items were first seen.

    A ranking that names an item twice counts only its first place, and the repeat takes no
    place of its own.
    """
    if k < 0:
        raise InvalidInputError(f"the RRF constant k must be 0 or more, got {k}")
    scores: dict[H, float] = {}
    for ranking in rankings:
        seen: set[H] = set()
        for item in ranking:
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + len(seen))
    return sorted(scores.items(), key=lambda pair: -pair[1])
