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

from memstream.projections.fusion import Candidate

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
    ranked: Sequence[tuple[Candidate, T]], similarity: float
) -> list[tuple[Candidate, T]]:
    """`ranked` (best first) without the candidates that duplicate a better-ranked one.

    `similarity` is the cosine from which two memories naming the same anchors are one; above
    1 only normalised-identical contents collapse.
    """
    kept: list[tuple[Candidate, T]] = []
    seen_texts: set[str] = set()
    kept_vectors: list[np.ndarray] = []
    kept_anchors: list[frozenset[str]] = []
    for candidate, score in ranked:
        text = normalised(candidate.memory.content)
        if text in seen_texts:
            continue
        mine = anchors(candidate.memory.content)
        if kept_vectors and similarity <= 1.0:
            cosines = np.stack(kept_vectors) @ candidate.vector
            if any(
                cosine >= similarity and theirs == mine
                for cosine, theirs in zip(cosines, kept_anchors, strict=True)
            ):
                continue
        kept.append((candidate, score))
        seen_texts.add(text)
        kept_vectors.append(candidate.vector)
        kept_anchors.append(mine)
    return kept
