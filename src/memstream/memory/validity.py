"""When an extracted fact holds: from its valid-from (the day its event happened, else the
moment it was said) until a fact about the same subject with a later valid-from supersedes it.

Graphiti's bi-temporal edges without a graph: a fact names its subject in a few words
(`model.SUBJECT`, "the user's home city"), and the facts of one subject, ordered by valid-from,
follow one another. Nothing is deleted: a superseded fact stays, with the valid-from of its
successor as its `valid_to`; recall ranks it below what holds at the moment asked about
(`judged`) and the prompt says until when it held. Facts with the same valid-from both hold
(one turn's facts about one subject are all true at once).

Which fact supersedes which is a function of the facts held, not of the order they arrived
in: a late extraction of an older turn is born superseded, forgetting the newer fact lets
the older one hold again, and a replay rebuilds the same. Every backend orders a subject's
facts this way (the Redis projection in its subject orders, orders.lua; the in-memory backend
and the history fold with `successors`).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from memstream.memory.model import EVENT_DATE, SUBJECT, Memory

__all__ = [
    "SUPERSEDED_WEIGHT",
    "Succession",
    "holds_at",
    "judged",
    "subject_key",
    "successors",
    "valid_from",
]

# What a fact that does not hold at the moment asked about keeps of its score: enough to
# stay findable ("where did I live before?"), not enough to outrank its successor when both
# match the query alike.
SUPERSEDED_WEIGHT = 0.5

# A backend's answer to "until when did these facts hold?": each fact's valid_to, by id, for
# those a later fact of their subject superseded (absent: it still holds).
Succession = Callable[[Sequence[Memory]], Mapping[str, datetime]]

C = TypeVar("C")


def subject_key(memory: Memory) -> str | None:
    """The key of the memory's subject: a digest of its words, case and punctuation aside
    (16 hex digits, fit for a Redis key); None for a memory that names none."""
    subject = memory.metadata.get(SUBJECT)
    return _key(subject) if subject else None


# Ranking asks several times per candidate: one digest per subject text.
@functools.lru_cache(maxsize=4096)
def _key(subject: str) -> str | None:
    words = "".join(c if c.isalnum() else " " for c in subject.casefold()).split()
    if not words:
        return None
    return hashlib.sha256(" ".join(words).encode()).hexdigest()[:16]


def valid_from(memory: Memory) -> datetime:
    """When the fact began to hold: its event's day (EVENT_DATE), else when it was said."""
    raw = memory.metadata.get(EVENT_DATE)
    if raw:
        try:
            day = datetime.fromisoformat(raw)
        except ValueError:
            return memory.timestamp  # a client's malformed date: the moment it was said
        return day.replace(tzinfo=UTC) if day.tzinfo is None else day
    return memory.timestamp


def successors(held: Iterable[Memory], facts: Sequence[Memory]) -> dict[str, datetime]:
    """`facts`' valid_to among the memories `held` (the tenant's): the first valid-from of
    their subject later than their own, for those a later fact superseded."""
    wanted = {key for m in facts if (key := subject_key(m)) is not None}
    if not wanted:
        return {}
    starts: dict[str, list[float]] = defaultdict(list)
    for memory in held:
        key = subject_key(memory)
        if key in wanted:
            starts[key].append(valid_from(memory).timestamp())
    until: dict[str, datetime] = {}
    for memory in facts:
        key = subject_key(memory)
        if key is None:
            continue
        ordered = sorted(starts[key])
        at = bisect.bisect_right(ordered, valid_from(memory).timestamp())
        if at < len(ordered):
            until[memory.id] = datetime.fromtimestamp(ordered[at], UTC)
    return until


def holds_at(memory: Memory, valid_to: datetime | None, at: datetime) -> bool:
    """Whether the memory holds at `at`: a fact with a subject from its valid-from until its
    `valid_to`; any other memory always."""
    if subject_key(memory) is None:
        return True
    return valid_from(memory) <= at and (valid_to is None or at < valid_to)


def judged(
    scored: Sequence[tuple[C, float]],
    memory_of: Callable[[C], Memory],
    until: Mapping[str, datetime],
    at: datetime,
) -> list[tuple[C, float]]:
    """`scored` (best first) with what does not hold at `at` down-weighted by
    SUPERSEDED_WEIGHT, best first again (ties keep their order)."""
    weighed = [
        (item, score if holds_at(m, until.get(m.id), at) else score * SUPERSEDED_WEIGHT)
        for item, score in scored
        for m in (memory_of(item),)
    ]
    return sorted(weighed, key=lambda pair: -pair[1])
