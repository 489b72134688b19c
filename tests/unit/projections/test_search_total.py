"""The hybrid search's `total` never counts a memory its page lacks, even when the worker
writes one between the count and the recall (a client polling on `total` reads it as found)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.memory.model import Memory, MemoryType, RecalledMemory
from memstream.memory.search import SearchFilter
from memstream.projections.recall import HybridQuery, RedisRecaller
from memstream.projections.schema import Keyspace
from memstream.projections.search import FilteredSearch


def _memory(n: int) -> Memory:
    return Memory(
        id=f"m{n}",
        tenant="acme",
        thread="t",
        content=f"the cat is called Miso ({n})",
        memory_type=MemoryType.USER_FACT,
        role="user",
        timestamp=datetime(2026, 12, 4, tzinfo=UTC),
        importance=0.5,
        event_id=f"e{n}",
    )


class _Recaller:
    """Recall over a projection the worker writes to: as Redis runs `recall_counted`'s round
    trip, the count first, then (the worker's write landing in between) the searches."""

    def __init__(self) -> None:
        self.memories: list[Memory] = []

    def recall_counted(
        self, text: str, query: Callable[..., object], counted: str, tuning: object = None
    ) -> tuple[list[RecalledMemory], int]:
        total = len(self.memories)
        self.memories.append(_memory(len(self.memories)))  # the worker, between the two
        return [RecalledMemory(m, 1.0) for m in self.memories], total


def test_a_memory_written_between_count_and_recall_is_never_counted_alone() -> None:
    recaller = _Recaller()
    search = FilteredSearch(object(), Keyspace("ns"), recaller)  # type: ignore[arg-type]
    first = search.search(SearchFilter(tenant="acme"), "what is the cat called?")
    assert (len(first.hits), first.total) == (1, 1)  # in the hits: the total rises to match
    second = search.search(SearchFilter(tenant="acme"), "what is the cat called?")
    assert (len(second.hits), second.total) == (2, 2)


def test_the_count_goes_in_the_recalls_round_trip_ahead_of_its_searches() -> None:
    tuning = Deployment(Settings.from_env({})).recall_tuning()
    recaller = RedisRecaller(object(), Keyspace("ns"), object(), tuning=tuning)  # type: ignore[arg-type]
    sent: list[list[Any]] = []

    def embedded(
        text: str, commands: Callable[[Any], Sequence[Sequence[Any]]], *, doing: str
    ) -> tuple[Any, None]:
        vector = np.ones(4, dtype=np.float32)
        sent.extend(list(c) for c in commands(vector))
        return vector, None

    recaller.embedded = embedded  # type: ignore[method-assign]
    where = SearchFilter(tenant="acme")
    recaller.recall_counted(
        "the cat", lambda v: HybridQuery("acme", "the cat", v, 10, where=where), "@tenant_tag:{x}"
    )
    count, *searches = sent
    assert count[:3] == ["FT.SEARCH", "ns:memories", "@tenant_tag:{x}"]
    assert count[-5:-2] == ["LIMIT", 0, 0]
    assert searches and all("LIMIT" in c and c[c.index("LIMIT") + 2] > 0 for c in searches[:2])
