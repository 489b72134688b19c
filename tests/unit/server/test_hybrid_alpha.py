"""AMS's `hybrid_alpha` as memstream's fusion weight (server/mapping.py, `vector_weight`)."""

from __future__ import annotations

import pytest

from memstream.server.mapping import vector_weight
from memstream.server.models import SearchRequest


def _blend(text: float, cosine: float, weight: float) -> float:
    # memory.ranking.fusion's blend of the normalised word score and the cosine.
    return (text + weight * cosine) / (1 + weight)


@pytest.mark.parametrize("alpha", [0.0, 0.2, 0.5, 0.7, 0.95])
def test_the_weight_gives_the_blend_ams_defines(alpha: float) -> None:
    weight = vector_weight(SearchRequest(text="x", hybrid_alpha=alpha))
    assert weight is not None
    for text, cosine in ((1.0, 0.3), (0.2, 0.9), (0.0, 0.5)):
        assert _blend(text, cosine, weight) == pytest.approx(alpha * cosine + (1 - alpha) * text)


def test_meaning_alone_at_one_and_the_tuned_weight_when_unsent() -> None:
    weight = vector_weight(SearchRequest(text="x", hybrid_alpha=1.0))
    assert weight is not None and _blend(1.0, 0.4, weight) == pytest.approx(0.4, abs=1e-5)
    assert vector_weight(SearchRequest(text="x")) is None  # memstream's own weight decides
