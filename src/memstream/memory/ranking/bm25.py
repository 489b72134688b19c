"""Okapi BM25, computed in-process over one tenant's statistics: recall's lexical score.

RediSearch scores BM25 with statistics of the whole index, which every tenant shares: a name
that is rare across tenants but fills one tenant's memories gets the idf of a rare word, and
each tenant's ranking depends on what the other tenants wrote. Measured on the LoCoMo dev
split (7 tenants in one index) that cost 1-2 points of recall@1 against a per-tenant BM25, and
it would drift further as tenants are added. Recall therefore uses Redis only to find the
candidates (documents holding a query word, unstemmed) and to count, per tenant, how many
memories hold each word; the score itself is computed here, the same way for recall and for
the bench's reference baseline, with Lucene's idf.

The bench's reference is Okapi's usual k1 = 1.2, b = 0.75 (`K1`, `B`). Recall uses k1 = 0.9,
b = 0.2 (`RECALL_K1`, `RECALL_B`), chosen on LoCoMo's four tuning conversations: a memory is a
short turn or fact, whose length says little about what it is about, so length is normalised
less; a repeated word saturates sooner. Evidence recall@1 rose from 0.417 to 0.436 there, and
from 0.380 to 0.388 on the three held-out ones, in process (docs/benchmarks.md).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping

__all__ = ["K1", "RECALL_B", "RECALL_K1", "B", "idf", "okapi"]

K1 = 1.2
B = 0.75
RECALL_K1 = 0.9
RECALL_B = 0.2


def idf(documents: int, frequency: int) -> float:
    """Lucene's BM25 idf of a word held by `frequency` of `documents` documents (never < 0)."""
    return math.log(1 + (documents - frequency + 0.5) / (frequency + 0.5))


def okapi(
    terms: Collection[str],
    counts: Counter[str],
    length: int,
    idfs: Mapping[str, float],
    average_length: float,
    *,
    k1: float = K1,
    b: float = B,
) -> float:
    """The BM25 score of one document (its word `counts` and `length`) for distinct `terms`."""
    norm = k1 * (1 - b + b * length / (average_length or 1.0))
    score = 0.0
    for term in terms:
        tf = counts.get(term, 0)
        if tf:
            score += idfs.get(term, 0.0) * tf * (k1 + 1) / (tf + norm)
    return score
