"""Thread neighbours (memory.ranking.neighbours): who they are, and what a top hit lends them;
questions and their answers (memory.ranking.questions)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memstream import Settings
from memstream.deployment import Deployment
from memstream.errors import InvalidInputError
from memstream.memory.model import Memory, MemoryType
from memstream.memory.ranking.fusion import Candidate
from memstream.memory.ranking.neighbours import LENDERS, lend, lenders, neighbours_in
from memstream.memory.ranking.questions import asks, weigh_questions
from memstream.memory.ranking.rank import TermStats, rank

T0 = datetime(2026, 11, 2, 9, tzinfo=UTC)
TUNING = replace(Deployment(Settings()).recall_tuning(), duplicate_similarity=2.0)


def said(
    n: int, content: str, *, thread: str = "t1", kind: MemoryType = MemoryType.CONVERSATION
) -> Memory:
    return Memory(
        id=f"m{n}",
        tenant="acme",
        content=content,
        memory_type=kind,
        thread=thread,
        timestamp=T0 + timedelta(minutes=n),
        importance=0.5,
        event_id=f"e{n}",
    )


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_the_neighbours_are_the_turns_within_reach_in_the_thread_in_time_order() -> None:
    turns = [said(n, f"turn {n}") for n in (3, 1, 2, 5, 4)]  # out of order: time decides
    other = said(6, "another thread", thread="t2")
    fact = said(7, "a store item", kind=MemoryType.KNOWLEDGE)
    pairs = [(m, unit(1, 0)) for m in [*turns, other, fact]]
    found = neighbours_in(pairs, [turns[0]], 1)  # m3
    assert [m.id for m, _ in found["m3"]] == ["m2", "m4"]
    assert [m.id for m, _ in neighbours_in(pairs, [turns[0]], 2)["m3"]] == ["m1", "m2", "m4", "m5"]
    # At a thread's ends there is only one side; a hit not among them has none.
    assert [m.id for m, _ in neighbours_in(pairs, [turns[1]], 1)["m1"]] == ["m2"]
    assert neighbours_in(pairs[1:], [turns[0]], 1) == {}


def test_a_filter_drops_a_neighbour_and_does_not_reach_past_it() -> None:
    turns = [said(n, f"turn {n}") for n in range(1, 6)]
    pairs = [(m, unit(1, 0)) for m in turns]
    hit = turns[2]  # m3

    def not_m2(memory: Memory) -> bool:
        return memory.id != "m2"

    # As Redis reads a thread's order: the places are the thread's, the filter comes after.
    assert [m.id for m, _ in neighbours_in(pairs, [hit], 1, not_m2)["m3"]] == ["m4"]
    assert [m.id for m, _ in neighbours_in(pairs, [hit], 2, not_m2)["m3"]] == ["m1", "m4", "m5"]


def test_a_turns_two_memories_at_one_time_are_ordered_by_id() -> None:
    query, answer = said(1, "q"), replace(said(1, "a"), id="m1a")
    pairs = [(query, unit(1, 0)), (answer, unit(0, 1)), (said(2, "next"), unit(1, 1))]
    assert [m.id for m, _ in neighbours_in(pairs, [query], 1)["m1"]] == ["m1a"]


def test_a_hit_lends_its_share_where_that_beats_a_neighbours_own_score() -> None:
    hit, weak, strong = said(1, "hit"), said(2, "weak"), said(3, "strong")
    scored = [
        (Candidate(strong, 1.0, 0.9, unit(1, 1)), 0.95),
        (Candidate(hit, 0.8, 0.9, unit(1, 0)), 0.9),
        (Candidate(weak, 0.0, 0.1, unit(0, 1)), 0.1),
    ]
    joined = said(0, "found by no search")
    around = {"m1": [(joined, unit(0, 1)), (weak, unit(0, 1)), (strong, unit(1, 1))]}
    ranked = lend(scored, around, unit(1, 0), 0.8)
    scores = {c.memory.id: score for c, score in ranked}
    assert scores["m2"] == 0.8 * 0.9 + 0.2 * 0.1  # lifted above its own 0.1
    assert scores["m3"] == 0.95  # its own was more than the hit lends it
    assert scores["m0"] == 0.8 * 0.9  # joins with no score of its own
    assert [c.memory.id for c, _ in ranked] == ["m3", "m1", "m2", "m0"]
    # Only conversation memories borrow: a store item next to the hit does not.
    item = said(4, "item", kind=MemoryType.KNOWLEDGE)
    beside = lend(scored, {"m1": [(item, unit(1, 0))]}, unit(1, 0), 0.8)
    assert "m4" not in {c.memory.id for c, _ in beside}


def test_only_the_best_conversation_memories_of_a_thread_lend() -> None:
    memories = [said(n, f"m{n}") for n in range(LENDERS + 2)]
    item = said(99, "item", kind=MemoryType.KNOWLEDGE)
    threadless = said(98, "saved with no thread", thread="")
    scored = [
        (Candidate(item, 0, 1, unit(1, 0)), 1.0),
        (Candidate(threadless, 0, 1, unit(1, 0)), 1.0),
    ] + [(Candidate(m, 0, 0.5, unit(1, 0)), 0.9 - 0.01 * n) for n, m in enumerate(memories)]
    assert [m.id for m in lenders(scored)] == [m.id for m in memories[:LENDERS]]


def test_rank_lends_only_when_the_share_and_the_reach_say_so() -> None:
    question, answer = said(1, "zanzibar festival trip"), said(2, "yes with my sister")
    noise = [said(n, f"noise {n}") for n in range(3, 8)]
    memories = [question, answer, *noise]
    # The answer shares no word and is further in meaning than the noise.
    vectors = np.stack([unit(1, 0.1), unit(0, 1)] + [unit(0.1, 1)] * 5)
    query = unit(1, 0)
    stats = TermStats(len(memories), (1, 1))
    pairs = list(zip(memories, vectors, strict=True))

    def around(hits: list[Memory], reach: int) -> dict[str, list[tuple[Memory, np.ndarray]]]:
        return neighbours_in(pairs, hits, reach)

    def top(**changes: float) -> list[str]:
        tuning = replace(TUNING, **changes)
        ranked = rank(memories, vectors, query, ("zanzibar", "festival"), stats, tuning, 2, around)
        return [hit.memory.id for hit in ranked]

    assert top(neighbour_share=0.8, neighbour_reach=1) == ["m1", "m2"]
    # Off either way, or without a backend to ask: the nearest noise comes second.
    assert top(neighbour_share=0.0, neighbour_reach=1) == ["m1", "m3"]
    assert top(neighbour_share=0.8, neighbour_reach=0) == ["m1", "m3"]
    alone = rank(memories, vectors, query, ("zanzibar", "festival"), stats, TUNING, 2)
    assert [hit.memory.id for hit in alone] == ["m1", "m3"]


def test_a_turn_asks_when_it_ends_with_a_question_mark() -> None:
    assert asks(said(1, "Where did you go camping?  "))
    assert not asks(said(1, "Where did you go? The lake, I bet."))
    assert not asks(said(1, 'She said "why?" and left'))
    assert not asks(said(1, "Why not?", kind=MemoryType.KNOWLEDGE))  # a stored fact: no turn


def test_a_memory_that_asks_keeps_its_weight_of_its_score() -> None:
    question, statement = said(1, "Where is it?"), said(2, "It is in Lisbon.")
    scored = [
        (Candidate(question, 1.0, 0.9, unit(1, 0)), 0.9),
        (Candidate(statement, 0.9, 0.9, unit(1, 0)), 0.85),
    ]
    weighed = weigh_questions(scored, 0.9)
    assert [(c.memory.id, s) for c, s in weighed] == [("m2", 0.85), ("m1", pytest.approx(0.81))]
    assert [c.memory.id for c, _ in weigh_questions(scored, 1.0)] == ["m1", "m2"]


def test_a_question_hands_the_turn_after_it_the_answer_share() -> None:
    before, question = said(1, "We should plan a trip."), said(2, "Where did you go camping?")
    answer, later = said(3, "At the lake, in June."), said(4, "It rained a lot.")
    scored = [(Candidate(question, 1.0, 0.9, unit(1, 0)), 0.9)]
    around = {"m2": [(before, unit(0, 1)), (answer, unit(0, 1)), (later, unit(0, 1))]}
    scores = {c.memory.id: s for c, s in lend(scored, around, unit(1, 0), 0.5, 1.0)}
    # The answer takes the question's score; the other neighbours only the neighbour share.
    assert scores == {"m2": 0.9, "m3": 0.9, "m1": 0.45, "m4": 0.45}
    # A hit that states hands nobody more than the share; no answer share, no answer lift.
    stated = [(Candidate(replace(question, content="We went camping."), 1.0, 0.9, unit(1, 0)), 0.9)]
    assert {c.memory.id: s for c, s in lend(stated, around, unit(1, 0), 0.5, 1.0)}["m3"] == 0.45
    assert {c.memory.id: s for c, s in lend(scored, around, unit(1, 0), 0.5, 0.0)}["m3"] == 0.45
    # With no neighbour share, only the answer joins: the others get nothing to rank with.
    alone = {c.memory.id: s for c, s in lend(scored, around, unit(1, 0), 0.0, 1.0)}
    assert alone == {"m2": 0.9, "m3": 0.9}


def test_rank_puts_the_answer_in_its_questions_place() -> None:
    question = said(1, "Did you ever make it to the Zanzibar festival?")
    answer = said(2, "Yes, my sister and I went last spring.")
    statement = said(3, "The Zanzibar festival is in July.", thread="t2")
    noise = [said(n, f"noise {n}", thread="t3") for n in range(4, 8)]
    memories = [question, answer, statement, *noise]
    # The question matches best; the answer shares no word and is far in meaning.
    vectors = np.stack([unit(1, 0.05), unit(0, 1), unit(1, 0.3)] + [unit(0.1, 1)] * 4)
    terms = ("zanzibar", "festival")
    stats = TermStats(len(memories), (2, 2))
    pairs = list(zip(memories, vectors, strict=True))

    def top(**changes: float) -> list[str]:
        tuning = replace(TUNING, **changes)
        ranked = rank(
            memories, vectors, unit(1, 0), terms, stats, tuning, 3,
            lambda hits, reach: neighbours_in(pairs, hits, reach),
        )  # fmt: skip
        return [hit.memory.id for hit in ranked]

    # The defaults (share 1, weight 0.9): the answer takes the question's place, and the
    # question, weighed down, falls below the statement that matched nearly as well.
    assert top() == ["m2", "m3", "m1"]
    assert top(neighbour_share=0.0) == ["m2", "m3", "m1"]  # the answer lever stands alone
    assert top(answer_share=0.0) == ["m3", "m1", "m2"]  # only the neighbour share: below
    assert top(answer_share=0.0, question_weight=1.0, neighbour_share=0.0) == ["m1", "m3", "m4"]
    # Without the weight the answer ties its question, and the question, ranked first, stays.
    assert top(question_weight=1.0) == ["m1", "m2", "m3"]


def test_the_answer_share_and_question_weight_are_checked() -> None:
    with pytest.raises(InvalidInputError, match="answer share and the question weight"):
        replace(TUNING, answer_share=1.5)
    with pytest.raises(InvalidInputError, match="answer share and the question weight"):
        replace(TUNING, question_weight=-0.1)


def test_a_turns_reply_answers_its_question_whichever_id_or_time_says_otherwise() -> None:
    # A turn's two memories share an event; ids (hashes) order them by chance, and a time read
    # from the index is rounded to 10 ms where one read from the memory is not.
    asked = replace(said(1, "What is the old locker code?"), id="z-user", role="user")
    asked = replace(asked, timestamp=asked.timestamp + timedelta(milliseconds=3))
    reply = replace(said(1, "The old locker opens with 1014."), id="a-reply", role="assistant")
    nxt_reply = replace(said(2, "You are welcome."), id="a-next", role="assistant")
    nxt = replace(said(2, "Thanks!"), id="z-next", role="user")
    scored = [(Candidate(asked, 1.0, 0.9, unit(1, 0)), 0.9)]
    around = {"z-user": [(reply, unit(0, 1)), (nxt_reply, unit(0, 1)), (nxt, unit(0, 1))]}
    scores = {c.memory.id: s for c, s in lend(scored, around, unit(1, 0), 0.5, 1.0)}
    assert scores == {"z-user": 0.9, "a-reply": 0.9, "a-next": 0.45, "z-next": 0.45}
    # An assistant's question is answered by the next turn, the user's words in it first.
    offered = replace(reply, content="Shall I book it?")
    scored = [(Candidate(offered, 1.0, 0.9, unit(1, 0)), 0.9)]
    around = {"a-reply": [(asked, unit(0, 1)), (nxt_reply, unit(0, 1)), (nxt, unit(0, 1))]}
    scores = {c.memory.id: s for c, s in lend(scored, around, unit(1, 0), 0.5, 1.0)}
    assert scores == {"a-reply": 0.9, "z-user": 0.45, "a-next": 0.45, "z-next": 0.9}
