"""Supersession: which extracted fact holds when (memory.validity), and how recall ranks what
no longer holds (memory.ranking.rank)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstream.memory.model import EVENT_DATE, SUBJECT, Memory, MemoryType
from memstream.memory.ranking.fusion import RecallTuning
from memstream.memory.ranking.rank import rank
from memstream.memory.validity import (
    SUPERSEDED_WEIGHT,
    holds_at,
    subject_key,
    successors,
    valid_from,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
TUNING = RecallTuning(1.0, 0.0, 0.0, 30.0, 0.99, 0.0, 0, 0.0, 1.0)


def fact(i: int, subject: str | None, *, day: int | None = None, event: str = "") -> Memory:
    metadata = {SUBJECT: subject} if subject is not None else {}
    if event:
        metadata[EVENT_DATE] = event
    return Memory(
        f"f{i}", "acme", f"fact {i}", MemoryType.USER_FACT, "t",
        T0 + timedelta(days=day if day is not None else i), 0.5, f"e{i}", metadata=metadata,
    )  # fmt: skip


def test_a_subject_is_its_words_whatever_their_case_and_punctuation() -> None:
    assert subject_key(fact(1, "The user's home city")) == subject_key(
        fact(2, "the USER S home-city!")
    )
    assert subject_key(fact(1, "the user's home city")) != subject_key(fact(2, "the user's job"))
    key = subject_key(fact(1, "Ähm, the café"))
    assert key is not None and len(key) == 16 and int(key, 16) >= 0
    assert subject_key(fact(1, None)) is None and subject_key(fact(2, " ?! ")) is None


def test_a_fact_holds_from_its_event_day_else_from_when_it_was_said() -> None:
    assert valid_from(fact(1, "s")) == T0 + timedelta(days=1)
    assert valid_from(fact(1, "s", event="2026-02-14")) == datetime(2026, 2, 14, tzinfo=UTC)
    assert valid_from(fact(1, "s", event="the other day")) == T0 + timedelta(days=1)


def test_each_fact_holds_until_the_next_valid_from_of_its_subject() -> None:
    berlin, lyon, paris = fact(1, "home"), fact(5, "home"), fact(9, "Home!")
    job, twin = fact(3, "job"), fact(6, "home", day=5)  # twin: the same moment as lyon
    held = [paris, job, berlin, twin, lyon]
    until = successors(held, held)
    day = {n: T0 + timedelta(days=n) for n in (5, 9)}
    assert until == {berlin.id: day[5], lyon.id: day[9], twin.id: day[9]}
    # Only the facts asked about are answered; a memory without a subject is never judged.
    assert successors(held, [berlin]) == {berlin.id: day[5]}
    assert successors([*held, fact(7, None)], [fact(7, None)]) == {}
    assert holds_at(berlin, day[5], T0 + timedelta(days=2))
    assert not holds_at(berlin, day[5], day[5]) and not holds_at(paris, None, day[5])
    assert holds_at(fact(7, None), None, T0)


@given(st.permutations(range(6)))
def test_which_fact_supersedes_which_does_not_depend_on_the_order_they_arrive_in(
    order: list[int],
) -> None:
    facts = [fact(i, "home", day=i // 2) for i in range(6)]
    arrived = [facts[i] for i in order]
    assert successors(arrived, arrived) == successors(facts, facts)


def test_recall_ranks_what_no_longer_holds_below_what_does_and_says_until_when() -> None:
    old, new = fact(1, "home"), fact(5, "home")
    vectors = np.eye(2, dtype=np.float32)
    # The old fact is the better match by itself...
    query = np.asarray([1.0, 0.6], dtype=np.float32)
    plain = rank([old, new], vectors, query, [], None, TUNING, 2)
    assert [h.memory.id for h in plain] == [old.id, new.id]

    def until(facts: object) -> dict[str, datetime]:
        return successors([old, new], [old, new])

    now = rank([old, new], vectors, query, [], None, TUNING, 2, succession=until)
    assert [(h.memory.id, h.valid_to) for h in now] == [(new.id, None), (old.id, new.timestamp)]
    assert now[1].score == pytest.approx(plain[0].score * SUPERSEDED_WEIGHT)
    # ...and what was true on day 3 is the old fact (the new one did not hold yet).
    at = T0 + timedelta(days=3)
    then = rank([old, new], vectors, query, [], None, TUNING, 2, succession=until, valid_at=at)
    assert [h.memory.id for h in then] == [old.id, new.id]
