"""Reciprocal rank fusion: one ranking from several, using ranks only.

Each item scores the sum over the rankings that contain it of 1 / (k + rank), rank counted
from 1 (Cormack, Clarke and Büttcher, SIGIR 2009). Ranks, not raw scores, because BM25 scores
and cosine similarities live on unrelated scales, and BM25's scale changes with the query's
length and the tenant's vocabulary; fusing ranks needs no calibration per tenant.

k damps the head of each list: with k = 60 (the paper's value, which it found robust across
collections) the first and tenth places differ by ~14 %, so an item both lists rank fairly
high beats one that a single list ranks first. Measured on the LoCoMo dev split with 20
candidates a list (docs/benchmarks.md), k from 10 to 100 moved recall@10 by under half a
point (0.600-0.603); how deep each list goes mattered far more than k.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

from memstream.errors import InvalidInputError

__all__ = ["RRF_K", "reciprocal_rank_fusion"]

RRF_K = 60

H = TypeVar("H", bound=Hashable)


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
