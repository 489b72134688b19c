"""Duplicate collapse at recall, on hand-made vectors (the real model is tested end to end)."""

from datetime import UTC, datetime

import numpy as np

from memstream.memory.model import Memory, MemoryType
from memstream.memory.ranking.dedup import anchors, collapse_duplicates, normalised
from memstream.memory.ranking.fusion import Candidate


def _at(content: str, angle: float) -> tuple[Candidate, float]:
    """A candidate whose unit vector is `angle` radians from the x axis (cosine = cos angle)."""
    memory = Memory(
        id=content,
        tenant="acme",
        content=content,
        memory_type=MemoryType.CONVERSATION,
        thread="t",
        timestamp=datetime(2026, 1, 1, tzinfo=UTC),
        importance=0.5,
        event_id="e",
    )
    vector = np.array([np.cos(angle), np.sin(angle)], dtype=np.float32)
    return Candidate(memory, lexical=1.0, cosine=1.0, vector=vector), 1.0


def _kept(
    ranked: list[tuple[Candidate, float]], similarity: float = 0.95, limit: int = 10
) -> list[str]:
    return [c.memory.content for c, _ in collapse_duplicates(ranked, similarity, limit)]


def test_normalisation_ignores_case_punctuation_and_spacing() -> None:
    assert normalised("  Crate 4 holds  PEARS. ") == normalised("crate 4, holds pears!")
    assert normalised("crate 4 holds pears") != normalised("crate 7 holds pears")


def test_anchors_are_numbers_and_names_not_the_first_word() -> None:
    assert anchors("Crate 4 holds pears from Lisbon on 7 May") == {"4", "lisbon", "7", "may"}
    assert anchors("crate 4 holds pears") == anchors("Crate 4 holds pears.")


def test_identical_text_after_normalisation_collapses_even_far_apart_in_vector() -> None:
    ranked = [_at("Crate 4 holds pears.", 0.0), _at("crate 4 holds  pears", 1.5)]
    assert _kept(ranked) == ["Crate 4 holds pears."]


def test_near_identical_meaning_with_the_same_anchors_collapses_to_the_first() -> None:
    # cos(0.2) ~ 0.980 >= 0.95
    ranked = [_at("The crate 4 holds pears", 0.0), _at("crate 4 holds pears", 0.2)]
    assert _kept(ranked) == ["The crate 4 holds pears"]
    assert _kept(ranked, similarity=0.99) == [c.memory.content for c, _ in ranked]


def test_facts_differing_in_a_number_name_or_date_are_not_duplicates() -> None:
    ranked = [
        _at("crate 4 holds pears", 0.0),
        _at("crate 7 holds pears", 0.01),  # cosine ~1.0, still another fact
        _at("Send it to Anna", 0.3),
        _at("Send it to Ben", 0.31),
        _at("Paid on 3 May", 0.6),
        _at("Paid on 4 May", 0.61),
    ]
    assert _kept(ranked) == [c.memory.content for c, _ in ranked]


def test_above_one_only_identical_text_collapses() -> None:
    ranked = [_at("crate 4 holds pears", 0.0), _at("the crate 4 holds pears", 0.0)]
    assert _kept(ranked, similarity=1.5) == ["crate 4 holds pears", "the crate 4 holds pears"]


def test_it_stops_once_the_limit_is_kept() -> None:
    ranked = [_at("crate 4 holds pears", 0.0), _at("Crate 4 holds pears!", 0.0)]
    ranked += [_at(f"crate {n} holds figs", 0.5 + n / 10) for n in range(5)]
    # The restatement takes no slot, so the limit is filled by the next distinct facts.
    assert _kept(ranked, limit=3) == [
        "crate 4 holds pears",
        "crate 0 holds figs",
        "crate 1 holds figs",
    ]
    assert _kept([], limit=3) == []
