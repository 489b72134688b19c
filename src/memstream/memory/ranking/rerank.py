"""A second reading of the best few: a reranker (a cross-encoder: `providers.rerankers`) reads
the query together with each of the ranking's top `RecallTuning.rerank_depth` memories and says
how well each answers it, which the first ranking, scoring words and vectors apart, cannot.

The top memories are then ordered by the reranker's relevance (ties keep the first ranking's
order), of which a fact that no longer holds keeps the superseded weight, as of its score
(`memory.validity`): its successor, read alike, ranks above it. Each place keeps the score it
had, so scores stay in 0..1 and in order, and what ranked below the depth keeps its place. An
answer is read after the question it answered: "Orange." alone answers nothing, "What colour
is the staging banner? Orange." does. Chosen on LoCoMo's tuning conversations
(docs/benchmarks.md, "A reranker"): the relevance blended with the first score, at any weight
or as a product, or with the question weight applied, did worse than the relevance alone once
answers are read with their questions; the first places are where words and vectors are
weakest and the reranker pays, and every memory read costs a few milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from memstream.memory.model import Memory
from memstream.memory.ranking.fusion import Candidate

__all__ = ["Reranker", "rerank"]

T = TypeVar("T", bound=float)


class Reranker(Protocol):
    """Reads a query with each of a few texts and scores how well each answers it."""

    @property
    def model_id(self) -> str: ...

    def relevance(self, query: str, texts: Sequence[str]) -> Sequence[float]:
        """One score in 0..1 a text, in the texts' order: higher answers `query` better."""
        ...


def rerank(
    ranked: Sequence[tuple[Candidate, T]],
    query: str,
    reranker: Reranker | None,
    depth: int,
    answered: Mapping[str, Memory] | None = None,
    keeps: Callable[[Memory], float] | None = None,
) -> list[tuple[Candidate, T]]:
    """`ranked` (best first) with its first `depth` ordered by the reranker's relevance, times
    what `keeps` says a memory keeps of it (a fact that no longer holds: the validity rule is
    not the reranker's to undo); each place keeps its score. An
    answer is read after the question it answered (`answered`, by the answer's id). Unchanged
    without a reranker, a query or two to order."""
    top = list(ranked[:depth])
    if reranker is None or len(top) < 2 or not query.strip():
        return list(ranked)
    asked = answered or {}
    texts = [
        f"{asked[c.memory.id].content} {c.memory.content}"
        if c.memory.id in asked
        else c.memory.content
        for c, _ in top
    ]
    relevance = reranker.relevance(query, texts)
    # Stable: a tie keeps the first ranking's order.
    kept = [keeps(c.memory) if keeps is not None else 1.0 for c, _ in top]
    order = sorted(range(len(top)), key=lambda i: -relevance[i] * kept[i])
    return [(top[i][0], top[place][1]) for place, i in enumerate(order)] + list(ranked[depth:])
