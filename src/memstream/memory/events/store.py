"""The LangGraph store's items: a put (`ItemStored`) and its TTL running out (`ItemExpired`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from memstream.errors import InvalidInputError
from memstream.memory.events.base import (
    Applies,
    EventType,
    Lapse,
    Origin,
    check_time,
    derive_id,
    writes_nothing,
)
from memstream.memory.model import Memory, MemoryType
from memstream.memory.tenancy import validate_tenant


def item_memory_id(tenant: str, namespace: tuple[str, ...], key: str) -> str:
    """The memory id of a store item: one per (tenant, namespace, key), whatever its value."""
    return derive_id("store.item", tenant, tuple(namespace), key)


@dataclass(frozen=True, slots=True)
class ItemStored:
    """A key-value store (the LangGraph store adapter) put an item: `value` (JSON) under
    `key` in `namespace`, searchable by `texts` (the text at each indexed field path, each
    searched apart; () when the item is not indexed), lapsing `ttl_minutes` after the put
    unless a read refreshes it (None: kept until deleted).

    Becomes one knowledge memory whose id is the item's slot (`item_memory_id`): a later put
    of the same namespace and key replaces it, and clears a forget's tombstone of the slot,
    because a new put is a new write, not a duplicate of the forgotten one. `put_id` is decided
    once by the writer, so a retried put applies once and a put of the same value again is
    still a put of its own (the log keeps every version). Version 1 had one `text`, the fields'
    texts joined, and no TTL; it reads as one text (or none) and no TTL.
    """

    type: ClassVar[str] = "ItemStored"
    version: ClassVar[int] = 2

    tenant: str
    namespace: tuple[str, ...]
    key: str
    put_id: str
    value: str
    texts: tuple[str, ...]
    recorded_at: datetime
    importance: float
    embedding_model: str
    ttl_minutes: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_time(self.recorded_at)
        object.__setattr__(self, "namespace", tuple(self.namespace))
        object.__setattr__(self, "texts", tuple(self.texts))
        if not self.namespace or not self.put_id:
            raise InvalidInputError("a stored item needs a namespace and a put id")
        if self.ttl_minutes is not None and not self.ttl_minutes > 0:
            raise InvalidInputError(
                f"an item's TTL is a positive number of minutes, got {self.ttl_minutes!r}; "
                "put it without a TTL to keep it until it is deleted"
            )
        try:
            json.loads(self.value)
        except ValueError:
            raise InvalidInputError("a stored item's value must be JSON text") from None

    @property
    def id(self) -> str:
        return derive_id("store.put", self.tenant, self.namespace, self.key, self.put_id)

    @property
    def memory_id(self) -> str:
        return item_memory_id(self.tenant, self.namespace, self.key)

    @property
    def expires_at(self) -> datetime | None:
        if self.ttl_minutes is None:
            return None
        return self.recorded_at + timedelta(minutes=self.ttl_minutes)


# Where a stored item's namespace, key, value and TTL travel in its memory's metadata.
ITEM_NAMESPACE, ITEM_KEY, ITEM_VALUE = "langgraph.namespace", "langgraph.key", "langgraph.value"
ITEM_TTL = "langgraph.ttl_minutes"


def _item_memories(event: ItemStored, event_id: str) -> tuple[Memory, ...]:
    metadata = {
        ITEM_NAMESPACE: json.dumps(list(event.namespace), ensure_ascii=False),
        ITEM_KEY: event.key,
        ITEM_VALUE: event.value,
    }
    if event.ttl_minutes is not None:
        metadata[ITEM_TTL] = repr(event.ttl_minutes)
    return (
        Memory(
            id=event.memory_id,
            tenant=event.tenant,
            # The joined texts: what recall (and BM25) reads of the item.
            content="\n".join(event.texts),
            memory_type=MemoryType.KNOWLEDGE,
            # LangGraph forbids "." in labels, so the joined namespace is unambiguous; it
            # lets `memstream forget --thread` forget a namespace.
            thread=".".join(event.namespace),
            timestamp=event.recorded_at,
            importance=event.importance,
            event_id=event_id,
            metadata=metadata,
            embedding_model=event.embedding_model,
            # One field is the content itself; several are each scored apart (best wins).
            facets=event.texts if len(event.texts) > 1 else (),
            expires_at=event.expires_at,
        ),
    )


def _upcast_item_v1_v2(body: dict[str, Any]) -> dict[str, Any]:
    # v1 carried the fields' texts joined; that one text is now the one field it was.
    text = body.pop("text", "")
    return {**body, "texts": [text] if text else [], "ttl_minutes": None}


ITEM_STORED = EventType(
    ItemStored,
    effect="store.put",
    applies=Applies.PUT,
    memories=_item_memories,
    memory_ids=lambda e: (e.memory_id,),
    upcasters=(_upcast_item_v1_v2,),
    sealed=("value", "texts"),
    origin=lambda e: Origin(".".join(e.namespace), e.recorded_at),
)


@dataclass(frozen=True, slots=True)
class ItemExpired:
    """A store item's TTL ran out: the put `put_event_id` lapsed at `deadline` (as the TTL
    sweeper saw it, refreshes included) and was removed at `expired_at`.

    Applied only while the slot still holds that put and its deadline is no later than
    `deadline`: a put or a refresh that came in between keeps the item. A replay has no
    refreshes (reads are not in the log), so every deadline there is at most the one the
    sweeper saw, and the replay expires exactly what had expired. The id is the put's and the
    deadline's, so two sweepers expiring the same lapse write one effect; the slot is not
    tombstoned (a later put writes it again)."""

    type: ClassVar[str] = "ItemExpired"
    version: ClassVar[int] = 1

    tenant: str
    namespace: tuple[str, ...]
    key: str
    put_event_id: str
    deadline: datetime
    expired_at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        object.__setattr__(self, "namespace", tuple(self.namespace))
        check_time(self.deadline)
        check_time(self.expired_at)
        if not self.namespace or not self.put_event_id:
            raise InvalidInputError("an expiry names the item's namespace and the put it ends")

    @property
    def id(self) -> str:
        deadline = self.deadline.astimezone(UTC).isoformat()
        return derive_id("store.expire", self.tenant, self.put_event_id, deadline)

    @property
    def memory_id(self) -> str:
        return item_memory_id(self.tenant, self.namespace, self.key)


ITEM_EXPIRED = EventType(
    ItemExpired,
    effect="store.expire",
    applies=Applies.EXPIRE,
    memories=writes_nothing,
    lapses=lambda e: Lapse(e.memory_id, e.put_event_id, e.deadline),
)


# This family's types: the registry's rows and the `MemoryEvent` union take them from here, so
# a new type of the family is its class, its row and its place in these two.
StoreEvent = ItemStored | ItemExpired
ROWS = (ITEM_STORED, ITEM_EXPIRED)
