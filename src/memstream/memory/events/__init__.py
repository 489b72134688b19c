"""Memory events: what the log says happened to a tenant's memory, one registry row per type.

Every event is a frozen dataclass with a past-tense name, a schema `version`, and a
deterministic `id` derived from its effect key, so a producer retry, a redelivery or a replay
of the same effect always carries the same id and the projection applies it at most once.
Everything non-deterministic (clock readings, importance, the embedding model) is decided
before the event is written and carried in it; turning an event into memories
(`memories_of`) is a pure function.

Five kinds of effect reach the log: memories recorded (`TurnCompleted`, `MessageRecorded`,
`MemorySaved` under a client's own id, `ItemStored` by the LangGraph store), memories a model
derived from a recorded turn (`MemoriesExtracted`, decided once by the extraction job),
memories forgotten (`MemoryForgotten`, the users' right to erasure; `TenantErased`, a whole
tenant crypto-shredded; `ItemExpired`, a store item whose TTL ran out), groups of memories
replaced by a summary (`MemoriesConsolidated`, decided once by the consolidation job), and
requests for that (`ConsolidationRequested`).

The log is kept forever, so every type has one `EventType` row, right below its class in its
family's module (`recorded`, `extraction`, `forgetting`, `consolidation`, `store`; what
every type shares is in `base`), listed in its family's `ROWS`, which `REGISTRY` here
gathers: its wire name and older names, its version, the upcasters that lift each older
version of its payload to the current one, the effect that writes it, how the projection
applies it (`Applies`), the memories it writes and where they come from (`Origin`), and what
it removes (`Selection`, `Lapse`). The codec (`memory.codec`), the hooks' effect journal,
the projection's writers (Redis and in-process), the history fold, lineage and the JSON
Schemas all read that row and none asks an event's class: adding an event type that applies
as an existing kind does is its class and row in its family's module, nothing else in the
code.
"""

from __future__ import annotations

from typing import Any

from memstream.memory.events import (
    consolidation,
    extraction,
    forgetting,
    namespaces,
    recorded,
    store,
    views,
)
from memstream.memory.events.base import (
    DOCUMENT_SEPARATOR,
    ID_NAMESPACE,
    Applies,
    DocumentChange,
    Event,
    EventType,
    Lapse,
    Origin,
    Selection,
    consolidate_effect_key,
    derive_id,
    record_effect_key,
)
from memstream.memory.events.consolidation import ConsolidationRequested, MemoriesConsolidated
from memstream.memory.events.extraction import (
    ExtractedFact,
    FactKind,
    MemoriesExtracted,
    extraction_id,
)
from memstream.memory.events.forgetting import MemoryForgotten, TenantErased
from memstream.memory.events.namespaces import (
    ACTIVE,
    ARCHIVED,
    NAMESPACE_NAMES,
    NAMESPACES,
    SCOPES,
    NamespaceCreated,
    NamespaceRemoved,
    NamespaceUpdated,
    check_name,
    name_slot,
    slot_of,
)
from memstream.memory.events.recorded import (
    MemorySaved,
    MessageRecorded,
    TurnCompleted,
    check_memory_id,
)
from memstream.memory.events.store import (
    ITEM_KEY,
    ITEM_NAMESPACE,
    ITEM_TTL,
    ITEM_VALUE,
    ItemExpired,
    ItemStored,
    item_memory_id,
)
from memstream.memory.events.views import (
    TASKS,
    VIEWS,
    PartitionSummarised,
    SummaryRunRequested,
    SummaryTaskChanged,
    SummaryViewDefined,
    SummaryViewRemoved,
    results_of,
)
from memstream.memory.model import Memory

__all__ = [
    "ACTIVE",
    "ARCHIVED",
    "DOCUMENT_SEPARATOR",
    "ID_NAMESPACE",
    "ITEM_KEY",
    "ITEM_NAMESPACE",
    "ITEM_TTL",
    "ITEM_VALUE",
    "NAMESPACES",
    "NAMESPACE_NAMES",
    "REGISTRY",
    "SCOPES",
    "TASKS",
    "VIEWS",
    "Applies",
    "ConsolidationRequested",
    "DocumentChange",
    "Event",
    "EventType",
    "ExtractedFact",
    "FactKind",
    "ItemExpired",
    "ItemStored",
    "Lapse",
    "MemoriesConsolidated",
    "MemoriesExtracted",
    "MemoryEvent",
    "MemoryForgotten",
    "MemorySaved",
    "MessageRecorded",
    "NamespaceCreated",
    "NamespaceRemoved",
    "NamespaceUpdated",
    "Origin",
    "PartitionSummarised",
    "Registry",
    "Selection",
    "SummaryRunRequested",
    "SummaryTaskChanged",
    "SummaryViewDefined",
    "SummaryViewRemoved",
    "TenantErased",
    "TurnCompleted",
    "check_memory_id",
    "check_name",
    "consolidate_effect_key",
    "derive_id",
    "extraction_id",
    "item_memory_id",
    "memories_of",
    "memory_ids_of",
    "name_slot",
    "record_effect_key",
    "results_of",
    "slot_of",
]


MemoryEvent = (
    recorded.Recorded
    | extraction.Extraction
    | forgetting.Forgetting
    | consolidation.Consolidation
    | store.StoreEvent
    | views.View
    | namespaces.NamespaceEvent
)


class Registry:
    """Every event type, found by class or by any wire name it was ever written under."""

    def __init__(self, *rows: EventType[Any]) -> None:
        self.rows = rows
        self._by_class = {row.event: row for row in rows}
        self._by_name: dict[str, tuple[EventType[Any], int]] = {}
        for row in rows:
            for name, version in [*row.aliases.items(), (row.name, row.version)]:
                if name in self._by_name:
                    raise TypeError(f"two event types (or versions) are written as {name!r}")
                self._by_name[name] = (row, version)

    def of(self, event: MemoryEvent) -> EventType[Any]:
        try:
            return self._by_class[type(event)]
        except KeyError:
            raise TypeError(f"{type(event).__name__} is not a registered event type") from None

    def named(self, name: str) -> tuple[EventType[Any], int] | None:
        """The row written as `name`, and the version a payload of that name has by default."""
        return self._by_name.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self._by_name)


REGISTRY = Registry(
    *recorded.ROWS,
    *extraction.ROWS,
    *forgetting.ROWS,
    *consolidation.ROWS,
    *store.ROWS,
    *views.ROWS,
    *namespaces.ROWS,
)


def memory_ids_of(event: MemoryEvent) -> tuple[str, ...]:
    """The ids of the memories `event` writes (`memories_of`'s ids, cheaper where it can be)."""
    row = REGISTRY.of(event)
    if row.memory_ids is not None:
        return row.memory_ids(event)
    return tuple(m.id for m in row.memories(event, event.id))


def memories_of(event: MemoryEvent, event_id: str | None = None) -> tuple[Memory, ...]:
    """The memories an event writes, without embeddings. Pure: same event, same memories.
    `event_id`: the event's id where the caller worked it out already (a decoder checking it)."""
    row = REGISTRY.of(event)
    written: tuple[Memory, ...] = row.memories(event, event.id if event_id is None else event_id)
    return written
