"""Memories consolidated: a group replaced by its summary (`MemoriesConsolidated`), and the
request for that (`ConsolidationRequested`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from memstream.errors import InvalidInputError
from memstream.memory.events.base import (
    Applies,
    EventType,
    Origin,
    check_metadata,
    check_time,
    consolidate_effect_key,
    derive_id,
    writes_nothing,
    written_memory,
)
from memstream.memory.model import Memory, MemoryType
from memstream.memory.tenancy import validate_tenant


@dataclass(frozen=True, slots=True)
class MemoriesConsolidated:
    """A group of a tenant's memories was summarised: the summary replaces the whole group.

    Everything the summary needs was decided once by the consolidation job and is carried
    here (the text from the model, the latest timestamp and highest importance of the group,
    the merged metadata). Applied only if every member still exists; otherwise skipped whole.
    """

    type: ClassVar[str] = "MemoriesConsolidated"
    version: ClassVar[int] = 1

    tenant: str
    memory_ids: tuple[str, ...]
    summary: str
    memory_type: MemoryType
    thread: str
    timestamp: datetime
    importance: float
    embedding_model: str
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_metadata(self.metadata)
        check_time(self.timestamp)
        object.__setattr__(self, "memory_ids", tuple(sorted(set(self.memory_ids))))
        object.__setattr__(self, "memory_type", MemoryType(self.memory_type))
        if len(self.memory_ids) < 2:
            raise InvalidInputError("a consolidation replaces a group of at least two memories")
        if not self.summary.strip():
            raise InvalidInputError("a consolidation needs a non-empty summary")

    @property
    def id(self) -> str:
        return derive_id(consolidate_effect_key(self.tenant, self.memory_ids))


def _summary_memories(event: MemoriesConsolidated, event_id: str) -> tuple[Memory, ...]:
    memory_id = derive_id(event_id, "summary")
    return (
        written_memory(
            event, memory_id, event.summary, "summary", event.timestamp, event.memory_type,
            event_id=event_id,
        ),
    )  # fmt: skip


MEMORIES_CONSOLIDATED = EventType(
    MemoriesConsolidated,
    effect="memory.consolidate",
    applies=Applies.CONSOLIDATE,
    memories=_summary_memories,
    sealed=("summary", "metadata"),
    origin=lambda e: Origin(e.thread, e.timestamp, replaced=e.memory_ids),
)


@dataclass(frozen=True, slots=True)
class ConsolidationRequested:
    """After a turn, the memory middleware asked for the tenant's memories recorded before
    `cutoff` to be consolidated. The consolidation job (streams.consolidation) gathers a
    tenant's requests in a window and answers with MemoriesConsolidated events; the projection
    writes nothing for a request. The id is the turn's: one request per turn."""

    type: ClassVar[str] = "ConsolidationRequested"
    version: ClassVar[int] = 1

    tenant: str
    thread: str
    run: str
    turn: int
    cutoff: datetime
    min_count: int
    requested_at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_time(self.cutoff)
        check_time(self.requested_at)
        if self.min_count < 2:
            raise InvalidInputError("a consolidation group needs at least 2 members")

    @property
    def id(self) -> str:
        return derive_id(
            "memory.consolidation-request", self.tenant, self.thread, self.run, self.turn
        )


CONSOLIDATION_REQUESTED = EventType(
    ConsolidationRequested,
    effect="memory.consolidation-request",
    applies=Applies.RECORD,
    memories=writes_nothing,
)


# This family's types: the registry's rows and the `MemoryEvent` union take them from here, so
# a new type of the family is its class, its row and its place in these two.
Consolidation = MemoriesConsolidated | ConsolidationRequested
ROWS = (MEMORIES_CONSOLIDATED, CONSOLIDATION_REQUESTED)
