"""The hybrid search's `total` never counts a memory its page lacks, even when the worker
writes one between the count and the recall (a client polling on `total` reads it as found)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from memstream.memory.model import Memory, MemoryType, RecalledMemory
from memstream.memory.search import SearchFilter
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


class _Projection:
    """The memories the index holds; the worker may write one more at any moment."""

    def __init__(self) -> None:
        self.memories: list[Memory] = []

    def pipeline(self, transaction: bool = False) -> _Pipeline:
        return _Pipeline(self)


class _Pipeline:
    def __init__(self, projection: _Projection) -> None:
        self._projection = projection
        self._commands: list[Sequence[Any]] = []

    def execute_command(self, *command: Any) -> None:
        self._commands.append(command)

    def execute(self) -> list[object]:
        # Only the count is sent here (LIMIT 0 0): its reply is the total, and no hit.
        assert all(c[0] == "FT.SEARCH" and c[3:6] == ("LIMIT", 0, 0) for c in self._commands)
        return [[len(self._projection.memories)] for _ in self._commands]


class _Recaller:
    """Recall over the projection; the worker writes a memory right after each recall."""

    def __init__(self, projection: _Projection) -> None:
        self._projection = projection

    def recall_query(
        self, text: str, query: Callable[..., object], *, keep: object = None
    ) -> list[RecalledMemory]:
        hits = [RecalledMemory(m, 1.0) for m in self._projection.memories]
        self._projection.memories.append(_memory(len(self._projection.memories)))
        return hits


def test_a_memory_written_between_count_and_recall_is_never_counted_alone() -> None:
    projection = _Projection()
    search = FilteredSearch(projection, Keyspace("ns"), _Recaller(projection))  # type: ignore[arg-type]
    first = search.search(SearchFilter(tenant="acme"), "what is the cat called?")
    assert (len(first.hits), first.total) == (0, 0)
    second = search.search(SearchFilter(tenant="acme"), "what is the cat called?")
    assert len(second.hits) == 1 and second.total == 1
