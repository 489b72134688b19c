"""Thread neighbours: what was said just before and after a top hit ranks with it.

In a conversation the answer to what a question asks is often a turn or two from the turn its
words and meaning find ("Did you go?" — "Yes, to the lake in May"). So the best hits lend a
share of their score to the memories within `reach` places of them in their thread (in time
order), and a neighbour ranks with the larger of its own score and

    share * the hit's score + (1 - share) * its own score (0 if no search found it).

A hit that asks a question hands the turn after it, its answer, `answer_share` instead where
that is more (`ranking.questions`: what was asked is not what is known).

Only conversation memories lend and borrow: a store item's namespace is a thread by name, not
a conversation. On LoCoMo's dev split (tuned on its four tuning conversations, docs/
benchmarks.md) share 0.8 and reach 2 lifted evidence recall@10 from 0.68 to 0.79 on the three
held-out ones; the three best hits lend (five lent no better, one lent 2 points less). Redis
reads them in one read-only script over each thread's order: ~0.75 ms of a recall at 100k
memories (MEMSTREAM_RECALL_NEIGHBOUR_SHARE=0 turns it off).

A backend says who the neighbours are (`Around`: a neighbour the candidates' filters would not
let through is left out, so a search never lends to what it could not return); the lending is
here, the same for every backend; `neighbours_in` finds them in memories already in hand, as
Redis finds them in its thread orders (projections/neighbours.lua).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta

import numpy as np

from memstream.memory.embeddings import Vectors
from memstream.memory.model import Memory, MemoryType
from memstream.memory.ranking.fusion import Candidate
from memstream.memory.ranking.questions import asks

__all__ = [
    "LENDERS",
    "WINDOW",
    "Around",
    "lend",
    "lenders",
    "neighbours_in",
    "order_key",
    "questions_answered",
]

LENDERS = 3
# How far in time a neighbour may be: what was said a day apart is not next to it, and the
# bound keeps a backend's read of a long thread short.
WINDOW = timedelta(days=1)

# The memories of a thread within `reach` places of each of `hits`, by hit id, with their
# vectors: a backend's answer to "who said what around these".
Around = Callable[[Sequence[Memory], int], Mapping[str, Sequence[tuple[Memory, Vectors]]]]


def order_key(memory: Memory) -> tuple[float, int, str]:
    """A memory's place in its thread: time, then the log's order (memories imported at one
    time), then id (a turn's two memories share an event)."""
    offset = memory.provenance.offset if memory.provenance is not None else -1
    return (memory.timestamp.timestamp(), offset, memory.id)


def lenders(scored: Sequence[tuple[Candidate, float]]) -> list[Memory]:
    """The hits that lend: the best `LENDERS` conversation memories said in a thread (one
    saved with no thread has no neighbours)."""
    return [c.memory for c, _ in scored if _conversational(c.memory)][:LENDERS]


def _conversational(memory: Memory) -> bool:
    return memory.memory_type is MemoryType.CONVERSATION and bool(memory.thread)


def lend(
    scored: Sequence[tuple[Candidate, float]],
    around: Mapping[str, Sequence[tuple[Memory, Vectors]]],
    query: Vectors,
    share: float,
    answer_share: float = 0.0,
) -> list[tuple[Candidate, float]]:
    """`scored` (best first) with each lender's neighbours ranked by what it lends them where
    that beats their own score (`share`; the answer to a lender that asks: the larger of
    `share` and `answer_share`); a neighbour no search found joins (its cosine computed here,
    no word score). Best first; ties keep the order they had."""
    own = {c.memory.id: (c, s) for c, s in scored}
    ranked = dict(own)
    for candidate, score in scored:
        near = [(m, v) for m, v in around.get(candidate.memory.id, ()) if _conversational(m)]
        answer = _answer(candidate.memory, near) if asks(candidate.memory) else None
        for memory, vector in near:
            held = own.get(memory.id)
            mine = held[1] if held is not None else 0.0
            given = max(share, answer_share) if memory.id == answer else share
            if not given:
                continue
            lent = given * score + (1 - given) * mine
            if lent > ranked.get(memory.id, (None, -1.0))[1]:
                joined = held[0] if held is not None else _joined(memory, vector, query)
                ranked[memory.id] = (joined, lent)
    return sorted(ranked.values(), key=lambda pair: -pair[1])


def questions_answered(
    hits: Sequence[Memory], around: Mapping[str, Sequence[tuple[Memory, Vectors]]]
) -> dict[str, Memory]:
    """The question each answer among the hits' neighbours answered, by the answer's id: what
    a reader needs beside "Orange." to know what it says."""
    found: dict[str, Memory] = {}
    for hit in hits:
        if asks(hit):
            near = [(m, v) for m, v in around.get(hit.id, ()) if _conversational(m)]
            answer = _answer(hit, near)
            if answer is not None:
                found.setdefault(answer, hit)
    return found


def _answer(hit: Memory, near: Sequence[tuple[Memory, Vectors]]) -> str | None:
    """The id of what answered `hit`: its turn's reply if the user asked it, else the first
    memory of the next event among `near` (the user's, where that event is a turn)."""
    # A turn's two memories share an event, a time and a log position, and their order in the
    # thread (by id) says nothing of who spoke first: the user asked, the assistant replied.
    # Their times are not compared either: the index returns times to 10 ms, a read of the
    # memory to the microsecond, and a neighbour may be read either way.
    if hit.role == "user":
        reply = next((m for m, _ in near if m.event_id == hit.event_id and m.role != "user"), None)
        if reply is not None:
            return reply.id
    later = [m for m, _ in near if m.event_id != hit.event_id and order_key(m) > order_key(hit)]
    if not later:
        return None
    following = min(later, key=order_key).event_id
    turn = [m for m in later if m.event_id == following]
    return min(turn, key=lambda m: (m.role != "user", m.id)).id


def _joined(memory: Memory, vector: Vectors, query: Vectors) -> Candidate:
    cosine = float(np.asarray(vector, dtype=np.float32) @ np.asarray(query, dtype=np.float32))
    return Candidate(memory=memory, lexical=0.0, cosine=cosine, vector=vector)


def neighbours_in(
    memories: Iterable[tuple[Memory, Vectors]],
    hits: Sequence[Memory],
    reach: int,
    keep: Callable[[Memory], bool] | None = None,
) -> dict[str, list[tuple[Memory, Vectors]]]:
    """The neighbours of each of `hits` among `memories` (with their vectors): the `reach`
    before and after it in its thread, by `order_key`, within `WINDOW` of it, and of those
    the ones `keep` lets through (a search's filters: they drop a neighbour, and do not reach
    past it for another)."""
    wanted = {hit.thread for hit in hits}
    threads: dict[str, list[tuple[Memory, Vectors]]] = defaultdict(list)
    for memory, vector in memories:
        if memory.thread in wanted and _conversational(memory):
            threads[memory.thread].append((memory, vector))
    found: dict[str, list[tuple[Memory, Vectors]]] = {}
    for hit in hits:
        thread = sorted(threads.get(hit.thread, ()), key=lambda pair: order_key(pair[0]))
        at = next((i for i, (m, _) in enumerate(thread) if m.id == hit.id), None)
        if at is not None:
            near = [*thread[max(0, at - reach) : at], *thread[at + 1 : at + 1 + reach]]
            found[hit.id] = [
                (m, v)
                for m, v in near
                if abs(m.timestamp - hit.timestamp) <= WINDOW and (keep is None or keep(m))
            ]
    return found
