"""The domain's one ranking (`memory.ranking.rank`), over candidates any backend found."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import numpy as np
import pytest

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.memory.model import Memory, MemoryType
from memstream.memory.ranking.bm25 import RECALL_B, RECALL_K1, idf, okapi
from memstream.memory.ranking.rank import TermStats, rank, tenant_bm25
from memstream.memory.ranking.tokens import memory_words

AT = datetime(2024, 5, 8, tzinfo=UTC)
TUNING = Deployment(Settings()).recall_tuning()


def _memory(content: str) -> Memory:
    return Memory(content, "acme", content, MemoryType.CONVERSATION, "t", AT, 0.5, "e")


def _unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_a_memory_is_searched_by_its_words_and_its_date() -> None:
    assert memory_words(_memory("The cat sat on Pixel's mat")) == [
        "cat", "sat", "pixel", "mat", "8", "may", "2024",
    ]  # fmt: skip


def test_bm25_uses_the_tenants_counts_not_the_candidates() -> None:
    memories = [_memory("tea with Ana"), _memory("coffee with Ana")]
    stats = TermStats(documents=100, frequencies=(2, 90))
    scores = tenant_bm25(["tea", "ana"], memories, stats)
    idfs = {"tea": idf(100, 2), "ana": idf(100, 90)}
    words = [memory_words(m) for m in memories]
    average = sum(map(len, words)) / 2
    expected = [
        okapi({"tea", "ana"}, Counter(w), len(w), idfs, average, k1=RECALL_K1, b=RECALL_B)
        for w in words
    ]
    assert scores == expected and scores[0] > scores[1] > 0


def test_recalls_bm25_weighs_a_memorys_length_less_than_okapis_usual() -> None:
    short, long = Counter(["tea"]), Counter(["tea", *[f"w{n}" for n in range(19)]])
    idfs, average = {"tea": 2.0}, 10.0

    def ratio(**params: float) -> float:
        scores = [
            okapi({"tea"}, c, sum(c.values()), idfs, average, **params) for c in (short, long)
        ]
        return scores[1] / scores[0]

    assert ratio() < ratio(k1=RECALL_K1, b=RECALL_B) < 1.0
    assert ratio(b=0.0) == 1.0  # without length normalisation, length does not count


def test_rank_fuses_collapses_duplicates_and_cuts_to_k() -> None:
    memories = [
        _memory("coffee with Ana"),
        _memory("Tea with Ana"),
        _memory("tea, with Ana!"),  # the same text as the one above, normalised
        _memory("a walk in the park"),
    ]
    vectors = np.stack([_unit(1, 0), _unit(1, 1), _unit(1, 1), _unit(0, 1)])
    query = _unit(1, 1)
    stats = TermStats(documents=10, frequencies=(2,))
    ranked = rank(memories, vectors, query, ["tea"], stats, TUNING, 3)
    assert [r.memory.content for r in ranked] == [
        "Tea with Ana", "coffee with Ana", "a walk in the park",
    ]  # fmt: skip
    assert all(0.0 <= r.score <= 1.0 for r in ranked)
    assert ranked[0].score > ranked[1].score >= ranked[2].score
    # Each hit says what its score was fused from: its words against the best, its meaning.
    a = TUNING.vector_weight
    for hit, vector in zip(ranked, (vectors[1], vectors[0], vectors[3]), strict=True):
        assert hit.parts is not None
        assert hit.parts.meaning == pytest.approx(float(vector @ query))
        fused = (hit.parts.words + a * max(hit.parts.meaning, 0.0)) / (1 + a)
        assert hit.score == pytest.approx(fused)
    assert [r.parts.words for r in ranked if r.parts] == [1.0, 0.0, 0.0]  # "tea" alone counts


def test_without_a_searchable_word_meaning_alone_ranks() -> None:
    memories = [_memory("north"), _memory("east")]
    vectors = np.stack([_unit(1, 0), _unit(0, 1)])
    ranked = rank(memories, vectors, _unit(0.1, 1), [], None, TUNING, 2)
    assert [r.memory.content for r in ranked] == ["east", "north"]
    assert rank([], np.empty((0, 2), dtype=np.float32), _unit(1, 0), [], None, TUNING, 2) == []
