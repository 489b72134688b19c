"""Memory events: what the log says happened to a tenant's memory, one registry row per type.

Every event is a frozen dataclass with a past-tense name, a schema `version`, and a
deterministic `id` derived from its effect key, so a producer retry, a redelivery or a replay
of the same effect always carries the same id and the projection applies it at most once.
Everything non-deterministic (clock readings, importance, the embedding model) is decided
before the event is written and carried in it; turning an event into memories
(`memories_of`) is a pure function.

Four kinds of effect reach the log: memories recorded (`TurnCompleted`, `MessageRecorded`,
`MemorySaved` under a client's own id, `ItemStored` by the LangGraph store),
memories forgotten (`MemoryForgotten`, the users' right to erasure; `TenantErased`, a whole
tenant crypto-shredded; `ItemExpired`, a store item whose TTL ran out), groups of memories
replaced by a summary (`MemoriesConsolidated`, decided once by the consolidation job), and
requests for that (`ConsolidationRequested`).

The log is kept forever, so every type has one `EventType` row in `REGISTRY`, right below its
class: its wire name and older names, its version, the upcasters that lift each older version
of its payload to the current one, the effect that writes it, how the projection applies it
and the memories it writes. The codec (`memory.codec`), the hooks' effect journal, the
projection's writer and the JSON Schemas all read that row: adding an event type is a class
and a row here.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from json.encoder import encode_basestring
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from memstream.errors import InvalidInputError
from memstream.memory.model import Memory, MemoryType
from memstream.memory.tenancy import validate_tenant

__all__ = [
    "ITEM_KEY",
    "ITEM_NAMESPACE",
    "ITEM_TTL",
    "ITEM_VALUE",
    "REGISTRY",
    "Applies",
    "ConsolidationRequested",
    "Event",
    "EventType",
    "ItemExpired",
    "ItemStored",
    "MemoriesConsolidated",
    "MemoryEvent",
    "MemoryForgotten",
    "MemorySaved",
    "MessageRecorded",
    "Origin",
    "Registry",
    "TenantErased",
    "TurnCompleted",
    "check_memory_id",
    "consolidate_effect_key",
    "derive_id",
    "item_memory_id",
    "memories_of",
    "memory_ids_of",
    "record_effect_key",
]

# Fixed forever: changing it changes every id and breaks apply-once across a replay.
ID_NAMESPACE = uuid.UUID("6f1b3f1e-8d7c-5b8e-9a61-4d2f0c3b7a10")


# json.dumps(parts, ensure_ascii=False), without building an encoder on every call.
_ID_JSON = json.JSONEncoder(ensure_ascii=False)
_NAMESPACE_BYTES = ID_NAMESPACE.bytes
_QUOTE: Callable[[str], str] = encode_basestring  # a JSON string, as ensure_ascii=False writes it


@lru_cache(maxsize=8192)
def derive_id(*parts: object) -> str:
    """uuid5 in ID_NAMESPACE of the JSON array of `parts` (docs/events.md, with test vectors)."""
    # JSON keeps the parts apart unambiguously ("a|b","c" vs "a","b|c"). Cached: an event's
    # id and its memories' ids are asked for many times on the hot path of a turn. What
    # uuid.uuid5 computes, spelled out (half its time: no UUID object on the turn's path).
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + _id_json(parts).encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _id_json(parts: tuple[object, ...]) -> str:
    # Texts and plain ints (what ids are made of) joined by hand, a third of the encoder's
    # time on a turn's path; anything else goes through the encoder. Same text either way.
    written = []
    for part in parts:
        if isinstance(part, str):
            written.append(_QUOTE(part))
        elif type(part) is int:  # not bool, which JSON writes as true/false
            written.append(str(part))
        else:
            return _ID_JSON.encode(parts)
    return "[" + ", ".join(written) + "]"


@lru_cache(maxsize=8192)
def record_effect_key(tenant: str, thread: str, run: str, turn: int) -> str:
    """The effect key of `memory.record` for one turn: the natural key of a TurnCompleted."""
    return _id_json(("memory.record", tenant, thread, run, turn))


def consolidate_effect_key(tenant: str, memory_ids: tuple[str, ...]) -> str:
    """The effect key of `memory.consolidate`: the tenant and the group's sorted memory ids."""
    return json.dumps(["memory.consolidate", tenant, *sorted(memory_ids)], ensure_ascii=False)


def _check_metadata(metadata: Mapping[str, str]) -> None:
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidInputError(
                f"metadata must map strings to strings; {key!r}: {value!r} is not; "
                "convert numbers and lists to text first"
            )


def _check_time(at: datetime) -> None:
    if at.tzinfo is None:
        raise InvalidInputError(
            f"timestamp {at.isoformat()} has no time zone; give it one (UTC is usual)"
        )


class Applies(enum.StrEnum):
    """How the projection applies an event (the kinds apply_once.lua knows)."""

    RECORD = "record"  # write the event's memories (none for a request: only its marker)
    FORGET = "forget"  # delete and tombstone the memories the event selects
    CONSOLIDATE = "consolidate"  # replace a group with the summary, if every member is there
    PUT = "put"  # write a store item's memory into its slot, replacing what the slot held
    ERASE = "erase"  # delete the whole tenant: its memories and tombstones
    EXPIRE = "expire"  # delete a store item whose put lapsed, if the slot still holds it


class Event(Protocol):
    """What every memory event has: a wire name and version, an id and a tenant."""

    type: ClassVar[str]
    version: ClassVar[int]

    @property
    def id(self) -> str: ...

    @property
    def tenant(self) -> str: ...


E = TypeVar("E", bound=Event)
Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Origin:
    """Where the memories an event writes come from, as their provenance names it
    (memory.lineage): the thread (a store item's namespace, dotted), when, the agent run and
    turn if a turn wrote them, and the memories a summary replaced."""

    thread: str
    at: datetime
    run: str = ""
    turn: int | None = None
    replaced: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EventType(Generic[E]):
    """One event type's row: everything that reads or writes that type asks here.

    `aliases` maps each older wire name to the last version written under it (a payload that
    names no version is of that one). `upcasters[n]` lifts a payload of version n + 1 to
    n + 2, so a payload of any version is lifted step by step to the class's version.
    """

    event: type[E]
    effect: str
    applies: Applies
    # The memories an event writes, given the event and its id (worked out once by the caller:
    # for some types it is a digest of the whole record).
    memories: Callable[[E, str], tuple[Memory, ...]]
    aliases: Mapping[str, int] = field(default_factory=dict)
    # The ids of `memories`, without building them: set where a turn waits on it.
    memory_ids: Callable[[E], tuple[str, ...]] | None = None
    upcasters: tuple[Upcaster, ...] = ()
    # The content fields, encrypted under the tenant's data key when the writer seals
    # (memory.cipher, docs/erasure.md); every other field is routing and stays clear.
    sealed: tuple[str, ...] = ()
    # Where the memories it writes come from: set on every type that writes memories, so each
    # of them carries its provenance.
    origin: Callable[[E], Origin] | None = None

    def __post_init__(self) -> None:
        names = {f.name for f in dataclasses.fields(self.event)}  # type: ignore[arg-type]
        if not set(self.sealed) <= names:
            raise TypeError(f"{self.name} seals fields it does not have: {self.sealed}")
        if len(self.upcasters) != self.version - 1:
            raise TypeError(
                f"{self.name} is version {self.version}: it needs {self.version - 1} upcasters "
                f"(one from each older version), has {len(self.upcasters)}"
            )
        if self.origin is None and self.memories is not _nothing:
            raise TypeError(
                f"{self.name} writes memories: say where they come from (`origin`), or their "
                "provenance would be missing"
            )

    @property
    def name(self) -> str:
        return self.event.type

    @property
    def version(self) -> int:
        return self.event.version


def _written(
    event: TurnCompleted | MessageRecorded | MemoriesConsolidated | MemorySaved,
    memory_id: str,
    content: str,
    role: str,
    at: datetime,
    memory_type: MemoryType = MemoryType.CONVERSATION,
    *,
    event_id: str,
) -> Memory:
    """One memory `event` (whose id is `event_id`: worked out once per event, it is a digest)
    writes under `memory_id`."""
    return Memory(
        id=memory_id,
        tenant=event.tenant,
        content=content,
        memory_type=memory_type,
        thread=event.thread,
        timestamp=at,
        importance=event.importance,
        event_id=event_id,
        role=role,
        metadata=event.metadata,
        embedding_model=event.embedding_model,
    )


def _nothing(event: object, event_id: str) -> tuple[Memory, ...]:
    return ()


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """One agent turn completed: the user's query and the assistant's answer.

    Becomes two conversation memories of the thread. The id is the effect key
    (tenant, thread, run, turn). `shown` are the ids of the memories the turn's prompt showed
    the model, in prompt order; `echo` says the answer only restated them (memory.echo): then
    the answer writes no memory, the query alone does (docs/lineage.md). Version 1 went on
    the wire as `TurnRecorded`, with the same fields and the same id; version 2 had no `shown`
    and no `echo` (it reads as shown nothing, no echo).
    """

    type: ClassVar[str] = "TurnCompleted"
    version: ClassVar[int] = 3

    tenant: str
    thread: str
    run: str
    turn: int
    query: str
    answer: str
    recorded_at: datetime
    importance: float
    embedding_model: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    shown: tuple[str, ...] = ()
    echo: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        _check_metadata(self.metadata)
        _check_time(self.recorded_at)
        object.__setattr__(self, "shown", tuple(self.shown))

    @property
    def id(self) -> str:
        # Not `shown` nor `echo`: what recall showed is not part of which turn this is, so
        # a retried turn is the same event whatever it was shown.
        return derive_id(record_effect_key(self.tenant, self.thread, self.run, self.turn))


def _turn_memories(event: TurnCompleted, event_id: str) -> tuple[Memory, ...]:
    at = event.recorded_at
    query = _written(event, derive_id(event_id, "user"), event.query, "user", at, event_id=event_id)
    if event.echo:  # the answer restated what the turn was shown: the user's words only
        return (query,)
    answer = derive_id(event_id, "assistant")
    return (query, _written(event, answer, event.answer, "assistant", at, event_id=event_id))


def _turn_memory_ids(event: TurnCompleted) -> tuple[str, ...]:
    query = derive_id(event.id, "user")
    return (query,) if event.echo else (query, derive_id(event.id, "assistant"))


def _upcast_turn_v1_v2(body: dict[str, Any]) -> dict[str, Any]:
    # v2 is the rename to the design's name: the fields, and so the id, are v1's.
    return body


def _upcast_turn_v2_v3(body: dict[str, Any]) -> dict[str, Any]:
    # A v2 turn did not record what it was shown: it reads as shown nothing, no echo.
    return {**body, "shown": [], "echo": False}


TURN_COMPLETED = EventType(
    TurnCompleted,
    effect="memory.record",
    applies=Applies.RECORD,
    memories=_turn_memories,
    memory_ids=_turn_memory_ids,
    aliases={"TurnRecorded": 1},
    upcasters=(_upcast_turn_v1_v2, _upcast_turn_v2_v3),
    sealed=("query", "answer", "metadata"),
    origin=lambda e: Origin(e.thread, e.recorded_at, e.run, e.turn),
)


@dataclass(frozen=True, slots=True)
class MessageRecorded:
    """A single message was recorded outside an agent turn (an import, a note).

    Becomes one conversation memory. Its id comes from `source_id`, the message's natural key
    in its source (for an import: a digest of the line's content), so recording the same
    message twice (say, importing a file again) adds nothing.
    """

    type: ClassVar[str] = "MessageRecorded"
    version: ClassVar[int] = 1

    tenant: str
    thread: str
    source_id: str
    content: str
    speaker: str
    recorded_at: datetime
    importance: float
    embedding_model: str
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        _check_metadata(self.metadata)
        _check_time(self.recorded_at)

    @property
    def id(self) -> str:
        return derive_id("memory.message", self.tenant, self.thread, self.source_id)


def _message_memories(event: MessageRecorded, event_id: str) -> tuple[Memory, ...]:
    memory_id = derive_id(event_id, "message")
    return (
        _written(
            event, memory_id, event.content, event.speaker, event.recorded_at, event_id=event_id
        ),
    )


MESSAGE_RECORDED = EventType(
    MessageRecorded,
    effect="memory.record",
    applies=Applies.RECORD,
    memories=_message_memories,
    sealed=("content", "metadata"),
    origin=lambda e: Origin(e.thread, e.recorded_at),
)


@dataclass(frozen=True, slots=True)
class MemoryForgotten:
    """A tenant asked to forget memories: by id, by filter, or all of them.

    Selection, one of: `memory_ids`; a filter (`thread`, recorded `before`, or both: the
    memories matching both); or `everything`. Which stored memories match is decided when the
    event is applied, at its place in the log, so a replay forgets exactly the same ones.
    Forgotten ids are tombstoned: no later event can write them again. `request_id` is decided
    once by the requester (the effect key is tenant + request), so a retried request forgets
    once."""

    type: ClassVar[str] = "MemoryForgotten"
    version: ClassVar[int] = 1

    tenant: str
    request_id: str
    requested_at: datetime
    memory_ids: tuple[str, ...] = ()
    thread: str | None = None
    before: datetime | None = None
    everything: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        _check_time(self.requested_at)
        if self.before is not None:
            _check_time(self.before)
        object.__setattr__(self, "memory_ids", tuple(sorted(set(self.memory_ids))))
        filtered = self.thread is not None or self.before is not None
        if [bool(self.memory_ids), filtered, self.everything].count(True) != 1:
            raise InvalidInputError(
                "say what to forget, one of: memory ids; a thread and/or a time (before); "
                "or everything of the tenant"
            )
        if not self.request_id:
            raise InvalidInputError("a forget request needs a request id, decided once")

    @property
    def id(self) -> str:
        return derive_id("memory.forget", self.tenant, self.request_id)


MEMORY_FORGOTTEN = EventType(
    MemoryForgotten, effect="memory.forget", applies=Applies.FORGET, memories=_nothing
)


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
        _check_metadata(self.metadata)
        _check_time(self.timestamp)
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
        _written(
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
        _check_time(self.cutoff)
        _check_time(self.requested_at)
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
    memories=_nothing,
)


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
        _check_time(self.recorded_at)
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
        _check_time(self.deadline)
        _check_time(self.expired_at)
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
    ItemExpired, effect="store.expire", applies=Applies.EXPIRE, memories=_nothing
)


# A client-chosen memory id travels in Redis keys and in the eviction order's members (whose
# id follows the last ':'), so it is limited to characters with no meaning there.
_CLIENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_memory_id(memory_id: object) -> str:
    """Return `memory_id` if a client may name a memory with it; raise InvalidInputError if not."""
    if not isinstance(memory_id, str) or not _CLIENT_ID.match(memory_id):
        raise InvalidInputError(
            f"memory id {memory_id!r} is not usable: ids are 1-128 characters of letters, "
            "digits, '.', '_' or '-', starting with a letter or digit (a ULID or UUID fits)"
        )
    return memory_id


@dataclass(frozen=True, slots=True)
class MemorySaved:
    """A client saved one memory under an id of its own choosing (the HTTP API, MCP tools).

    Becomes one memory whose id is `memory_id`. The event id derives from the tenant, the
    memory id and a digest of everything else, so sending the same record twice is one event
    (applied once), while saving the id again with other content is a new event that replaces
    the memory: the client's id is both its idempotency key and its handle.
    """

    type: ClassVar[str] = "MemorySaved"
    version: ClassVar[int] = 1

    tenant: str
    memory_id: str
    thread: str
    content: str
    memory_type: MemoryType
    role: str
    saved_at: datetime
    importance: float
    embedding_model: str
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_memory_id(self.memory_id)
        _check_metadata(self.metadata)
        _check_time(self.saved_at)
        object.__setattr__(self, "memory_type", MemoryType(self.memory_type))
        if not self.content.strip():
            raise InvalidInputError(f"memory {self.memory_id!r} has no text; say what to keep")

    @property
    def id(self) -> str:
        revision = _ID_JSON.encode(
            [
                self.thread,
                self.content,
                self.memory_type.value,
                self.role,
                self.saved_at.astimezone(UTC).isoformat(),
                self.importance,
                self.embedding_model,
                sorted(self.metadata.items()),
            ]
        )  # json.dumps(..., ensure_ascii=False), without building an encoder per call
        digest = hashlib.sha256(revision.encode()).hexdigest()
        return derive_id("memory.save", self.tenant, self.memory_id, digest)


def _saved_memories(event: MemorySaved, event_id: str) -> tuple[Memory, ...]:
    # The client's id is the memory's id: it is how the client gets or deletes it later.
    return (
        _written(
            event, event.memory_id, event.content, event.role, event.saved_at, event.memory_type,
            event_id=event_id,
        ),
    )  # fmt: skip


MEMORY_SAVED = EventType(
    MemorySaved,
    effect="memory.save",
    applies=Applies.RECORD,
    memories=_saved_memories,
    memory_ids=lambda e: (e.memory_id,),
    sealed=("content", "metadata"),
    origin=lambda e: Origin(e.thread, e.saved_at),
)


@dataclass(frozen=True, slots=True)
class TenantErased:
    """A tenant was erased (`memstream forget --tenant T --erase`): its data keys `key_ids`
    were destroyed, so every event of it sealed under them is unreadable for good, and the
    projection deletes the tenant: its memories and tombstones (applied markers, which hold
    ids only, stay, so nothing earlier is applied twice). Applied at its place in the log, so
    a replay erases exactly the same. The tenant may record again
    afterwards (under a new key). `request_id` is decided once by the requester."""

    type: ClassVar[str] = "TenantErased"
    version: ClassVar[int] = 1

    tenant: str
    request_id: str
    requested_at: datetime
    key_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        _check_time(self.requested_at)
        object.__setattr__(self, "key_ids", tuple(sorted(set(self.key_ids))))
        if not self.request_id:
            raise InvalidInputError("an erasure needs a request id, decided once")

    @property
    def id(self) -> str:
        return derive_id("tenant.erase", self.tenant, self.request_id)


TENANT_ERASED = EventType(
    TenantErased, effect="tenant.erase", applies=Applies.ERASE, memories=_nothing
)


MemoryEvent = (
    TurnCompleted
    | MessageRecorded
    | MemoryForgotten
    | MemoriesConsolidated
    | ConsolidationRequested
    | ItemStored
    | ItemExpired
    | MemorySaved
    | TenantErased
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
    TURN_COMPLETED,
    MESSAGE_RECORDED,
    MEMORY_FORGOTTEN,
    MEMORIES_CONSOLIDATED,
    CONSOLIDATION_REQUESTED,
    ITEM_STORED,
    ITEM_EXPIRED,
    MEMORY_SAVED,
    TENANT_ERASED,
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
