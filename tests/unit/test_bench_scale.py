"""`bench scale`'s choice of parts, refused before any cluster is started."""

import pytest

from memstream.config import Settings
from memstream.errors import InvalidInputError
from memstream.memory.embeddings import Embedder
from memstream_bench.scale import ScaleSizes, run_scale


def test_an_unknown_part_is_refused_before_a_cluster_starts() -> None:
    # No embedder and no cluster is reached: the refusal comes first.
    unused: Embedder = None  # type: ignore[assignment]
    with pytest.raises(InvalidInputError, match="--scale-only takes one of all, ratios"):
        run_scale(Settings(), unused, ScaleSizes(), only="faults")
