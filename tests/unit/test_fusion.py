from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import ConfigurationError, InvalidInputError
from memstream.memory.model import Memory, MemoryType
from memstream.memory.ranking.fusion import Candidate, RecallTuning, fuse, reciprocal_rank_fusion


def _tuning(**changes: float) -> RecallTuning:
    """The configured defaults (declared once, with the settings), with `changes`."""
    return replace(Deployment(Settings()).recall_tuning(), **changes)


def test_items_both_lists_rank_high_beat_an_item_only_one_ranks_first() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["d", "b", "c"]], k=60)
    assert [item for item, _ in fused] == ["b", "c", "a", "d"]
    scores = dict(fused)
    assert scores["b"] == pytest.approx(2 / 62)
    assert scores["a"] == pytest.approx(1 / 61)


def test_ties_keep_first_seen_order_and_duplicates_count_once() -> None:
    fused = reciprocal_rank_fusion([["x", "x", "y"], ["y", "x"]], k=0)
    assert fused == [("x", 1.5), ("y", 1.5)]


def test_empty_and_single_rankings() -> None:
    assert reciprocal_rank_fusion([]) == []
    assert [i for i, _ in reciprocal_rank_fusion([[3, 1, 2]])] == [3, 1, 2]


def test_a_negative_constant_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="k must be 0 or more"):
        reciprocal_rank_fusion([["a"]], k=-1)


def _candidate(content: str, lexical: float, cosine: float, **memory: object) -> Candidate:
    fields: dict[str, object] = {
        "id": content,
        "tenant": "acme",
        "content": content,
        "memory_type": MemoryType.CONVERSATION,
        "thread": "t",
        "timestamp": datetime(2026, 1, 1, tzinfo=UTC),
        "importance": 0.5,
        "event_id": "e",
    }
    fields.update(memory)
    vector = np.ones(4, dtype=np.float32) / 2
    return Candidate(Memory(**fields), lexical=lexical, cosine=cosine, vector=vector)  # type: ignore[arg-type]


def test_score_fusion_keeps_the_lexical_head_that_rank_fusion_loses() -> None:
    # "exact" is BM25's clear first and decent in meaning; "both" is mediocre in both lists.
    exact = _candidate("exact", lexical=9.0, cosine=0.70)
    both = _candidate("both", lexical=2.0, cosine=0.72)
    vague = _candidate("vague", lexical=0.0, cosine=0.75)
    fused = fuse([both, vague, exact], _tuning(vector_weight=4.0))
    assert [c.memory.content for c, _ in fused] == ["exact", "both", "vague"]
    # (1 + 4 * 0.7) / 5: the best words among the candidates, and the cosine as it is.
    assert fused[0][1] == pytest.approx((1 + 4 * 0.70) / 5)
    assert all(0.0 <= score <= 1.0 for _, score in fused)


def test_with_vector_weight_zero_the_order_is_bm25s() -> None:
    ranked = fuse(
        [_candidate("a", 1.0, 0.9), _candidate("b", 3.0, 0.1), _candidate("c", 2.0, 0.5)],
        _tuning(vector_weight=0.0),
    )
    assert [c.memory.content for c, _ in ranked] == ["b", "c", "a"]
    assert ranked[0][1] == 1.0


def test_importance_and_recency_lift_a_result_only_when_weighted() -> None:
    old_important = _candidate(
        "old", 1.0, 0.5, importance=1.0, timestamp=datetime(2025, 1, 1, tzinfo=UTC)
    )
    new_trivial = _candidate(
        "new", 1.0, 0.52, importance=0.0, timestamp=datetime(2026, 1, 1, tzinfo=UTC)
    )
    unweighted = fuse([old_important, new_trivial], _tuning())
    assert [c.memory.content for c, _ in unweighted] == ["new", "old"]
    by_importance = fuse([new_trivial, old_important], _tuning(importance_weight=0.2))
    assert [c.memory.content for c, _ in by_importance] == ["old", "new"]
    by_recency = fuse([old_important, new_trivial], _tuning(recency_weight=0.2))
    assert [c.memory.content for c, _ in by_recency] == ["new", "old"]
    # A year behind the newest at a 30-day half-life: recency ~0, so the gap widens.
    gap = by_recency[0][1] - by_recency[1][1]
    assert gap > unweighted[0][1] - unweighted[1][1]


@pytest.mark.parametrize(
    ("tuning", "says"),
    [
        ({"vector_weight": -1.0}, "vector weight"),
        ({"importance_weight": 0.6, "recency_weight": 0.5}, "sum to at most 1"),
        ({"recency_half_life_days": 0.0}, "half-life"),
    ],
)
def test_bad_tuning_is_refused_with_what_to_change(tuning: dict[str, float], says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        _tuning(**tuning)


def test_tuning_comes_from_the_settings() -> None:
    settings = Settings.from_env(
        {"MEMSTREAM_RECALL_VECTOR_WEIGHT": "2.5", "MEMSTREAM_RECALL_RECENCY_WEIGHT": "0.1"}
    )
    assert Deployment(settings).recall_tuning() == _tuning(vector_weight=2.5, recency_weight=0.1)
    too_much = Settings.from_env(
        {"MEMSTREAM_RECALL_IMPORTANCE_WEIGHT": "0.7", "MEMSTREAM_RECALL_RECENCY_WEIGHT": "0.7"}
    )
    with pytest.raises(ConfigurationError, match="MEMSTREAM_RECALL_IMPORTANCE_WEIGHT"):
        Deployment(too_much).recall_tuning()
