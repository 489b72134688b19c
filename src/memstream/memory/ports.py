"""The projection's ports: what the stream side and the stores ask of a projection backend.

The worker's projector and the replayer apply events through `ProjectionWriter` and move
generations through `Generations`; the agent side's stores read through `MemoryReader` and
`Recaller`. The Redis projection (memstream.projections) implements them all; a second
backend is a package that implements them too, plus a few lines of wiring in
`memstream.deployment`. The value types that cross the seam live here with the protocols.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from memstream.memory.embeddings import Vectors
from memstream.memory.events import MemoryEvent
from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.store import MemoryFilter

__all__ = [
    "AppliedOutcome",
    "Embedded",
    "Generations",
    "MemoryReader",
    "Position",
    "ProjectionWriter",
    "Recaller",
    "SwapResult",
]


@dataclass(frozen=True, slots=True)
class Position:
    """Where an event sits in the log."""

    topic: str
    partition: int
    offset: int

    @property
    def field(self) -> str:
        return f"{self.topic}/{self.partition}"


@dataclass(frozen=True, slots=True)
class Embedded:
    """An event ready to apply: its memories and one vector per memory, in the same order."""

    event: MemoryEvent
    memories: tuple[Memory, ...]
    vectors: Vectors
    position: Position | None = None


@dataclass(frozen=True, slots=True)
class AppliedOutcome:
    """What applying an event did (or, for a repeat, what it did the first time).

    `memory_ids` were written; `removed` were forgotten or replaced by a summary; a skipped
    consolidation says why in `skipped` and names the `missing` members. `evicted` is only
    known when `applied_now`.
    """

    event: MemoryEvent
    applied_now: bool
    memory_ids: tuple[str, ...]
    evicted: tuple[str, ...]
    removed: tuple[str, ...] = ()
    skipped: str = ""
    missing: tuple[str, ...] = ()

    @property
    def event_id(self) -> str:
        return self.event.id


class SwapResult(enum.IntEnum):
    SWAPPED = 1
    BEHIND = 0  # the live generation has taken in offsets the rebuild has not: read on
    STALE = -1  # another rebuild was swapped in since this one started


class ProjectionWriter(Protocol):
    """Applies events once, with each tenant's bound, to the live generation or `into` the
    one a rebuild writes; records the log positions it has taken into account."""

    async def ensure_live_index(self, embedding_model: str, dims: int) -> int: ...

    async def ensure_index(self, embedding_model: str, dims: int, generation: int) -> None: ...

    async def apply(
        self,
        batch: Sequence[Embedded],
        *,
        into: int | None = None,
        while_live: int | None = None,
    ) -> list[AppliedOutcome]:
        """Apply `batch` to the live generation, or `into` a rebuild's. With `while_live`,
        only while that generation is live: the outcomes are then a prefix of `batch`, and
        the caller applies the rest to the new live one (its vectors may be of another model).
        """
        ...

    async def advance(
        self,
        positions: Mapping[str, int],
        *,
        into: int | None = None,
        held: Mapping[str, int] | None = None,
    ) -> None: ...

    async def positions(self) -> dict[str, int]:
        """The live generation's positions: "topic/partition" -> last offset taken in."""
        ...

    async def known_vectors(self, memories: Sequence[Memory]) -> list[Vectors | None]: ...


class Generations(Protocol):
    """Generations of the projection: a rebuild writes a fresh one and swaps it in."""

    async def live(self) -> int: ...

    async def model(self, generation: int) -> str | None:
        """The embedding model `generation` was built with (None: it has no index yet). The
        projection owns it: events never decide which model embeds them."""
        ...

    async def allocate(self) -> int: ...

    async def swap_all(self, live: int, rebuilt: int) -> SwapResult: ...

    async def swap_tenant(self, live: int, rebuilt: int, tenant: str) -> SwapResult: ...

    async def drop(self, generation: int) -> None: ...


class MemoryReader(Protocol):
    def memories(self, tenant: str, where: MemoryFilter | None = None) -> list[Memory]:
        """The tenant's memories in the live generation (those `where` matches), oldest first."""
        ...


class Recaller(Protocol):
    def recall(self, tenant: str, text: str, k: int = 10) -> list[RecalledMemory]:
        """The tenant's memories most relevant to `text`, best first."""
        ...
