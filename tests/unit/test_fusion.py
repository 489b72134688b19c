import pytest

from memstream.errors import InvalidInputError
from memstream.projections.fusion import reciprocal_rank_fusion


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
