"""Duplicates collapse at recall: a memory restating a better-ranked one takes no slot of its own.

The projection keeps every memory (counts, ids and replay equality do not change); only the
list recall returns is thinned. Two memories are duplicates when

- their contents are the same after normalisation (case, punctuation and spacing ignored), or
- their meaning is near-identical (cosine of their vectors at least the threshold) *and* they
  name the same anchors: the tokens holding a digit and the capitalised words after the first.

The anchors keep facts apart that embeddings see as one: "crate 4 holds pears" and "crate 7
holds pears" are ~0.97 apart in cosine but differ in a number, and differing numbers, names or
dates are different facts. The first (best-ranked) of a group is the one kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from memstream.memory.ranking.fusion import Candidate

__all__ = ["anchors", "collapse_duplicates", "normalised"]

_WORD = re.compile(r"\w+", re.UNICODE)

T = TypeVar("T")


def normalised(text: str) -> str:
    """`text` case-folded, with punctuation dropped and spacing collapsed."""
    return " ".join(_WORD.findall(text.casefold()))


def anchors(text: str) -> frozenset[str]:
    """The words that make a fact this fact: those holding a digit, and capitalised words
    (names, months) other than the first word, which is capitalised anyway."""
    words = _WORD.findall(text)
    return frozenset(
        word.casefold()
        for at, word in enumerate(words)
        if any(ch.isdigit() for ch in word) or (at > 0 and word[:1].isupper())
    )


def collapse_duplicates(
    ranked: Sequence[tuple[Candidate, T]], similarity: float, limit: int
) -> list[tuple[Candidate, T]]:
    """The first `limit` of `ranked` (best first) that duplicate no better-ranked one.

    `similarity` is the cosine from which two memories naming the same anchors are one; above
    1 only normalised-identical contents collapse. Anchors are only worked out for pairs that
    are that close.
    """
    if not ranked or limit < 1:
        return []
    kept: list[int] = []
    # The kept candidates' vectors, one row each: a candidate is compared with at most
    # `limit` of them, never with the whole list.
    kept_vectors = np.empty((limit, len(ranked[0][0].vector)), dtype=np.float32)
    seen_texts: set[str] = set()
    anchors_of: dict[int, frozenset[str]] = {}

    def anchors_at(at: int) -> frozenset[str]:
        if at not in anchors_of:
            anchors_of[at] = anchors(ranked[at][0].memory.content)
        return anchors_of[at]

    for at, (candidate, _) in enumerate(ranked):
        if len(kept) == limit:
            break
        text = normalised(candidate.memory.content)
        if text in seen_texts:
            continue
        cosines = kept_vectors[: len(kept)] @ candidate.vector
        close = [other for other, cosine in zip(kept, cosines, strict=True) if cosine >= similarity]
        if any(anchors_at(other) == anchors_at(at) for other in close):
            continue
        kept_vectors[len(kept)] = candidate.vector
        kept.append(at)
        seen_texts.add(text)
    return [ranked[at] for at in kept]
