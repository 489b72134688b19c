"""Memory events: what the log says happened to a tenant's memory, and their wire format.

Every event is a frozen dataclass with a past-tense name, a schema `version`, and a
deterministic `id` derived from its effect key, so a producer retry, a redelivery or a replay
of the same effect always carries the same id and the projection applies it at most once.
Everything non-deterministic (clock readings, importance, the embedding model) is decided
before the event is written and carried in it; turning an event into memories
(`memories_of`) is a pure function.

Three kinds of effect reach the log: memories recorded (`TurnRecorded`, `MessageRecorded`),
memories forgotten (`MemoryForgotten`, the users' right to erasure) and groups of memories
replaced by a summary (`MemoriesConsolidated`, decided once by the consolidation job).

Wire format: one UTF-8 JSON object per Kafka message, with explicit fields, `type` and
`version`. No pickles. Each field is decoded by the parser of its annotated type.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache, singledispatch
from typing import Any, ClassVar

from memstream.errors import EventDecodeError, EventVersionError, InvalidInputError
from memstream.memory.model import Memory, MemoryType
from memstream.memory.tenancy import validate_tenant

__all__ = [
    "ITEM_KEY",
    "ITEM_NAMESPACE",
    "ITEM_VALUE",
    "ConsolidationRequested",
    "ItemStored",
    "MemoriesConsolidated",
    "MemoryEvent",
    "MemoryForgotten",
    "MessageRecorded",
    "TurnRecorded",
    "consolidate_effect_key",
    "decode_event",
    "encode_event",
    "item_memory_id",
    "memories_of",
    "record_effect_key",
]

# Fixed forever: changing it changes every id and breaks apply-once across a replay.
_ID_NAMESPACE = uuid.UUID("6f1b3f1e-8d7c-5b8e-9a61-4d2f0c3b7a10")


@lru_cache(maxsize=8192)
def _derive_id(*parts: object) -> str:
    # JSON keeps the parts apart unambiguously ("a|b","c" vs "a","b|c"). Cached: an event's
    # id and its memories' ids are asked for many times on the hot path of a turn.
    return str(uuid.uuid5(_ID_NAMESPACE, json.dumps(parts, ensure_ascii=False)))


@lru_cache(maxsize=8192)
def record_effect_key(tenant: str, thread: str, run: str, turn: int) -> str:
    """The effect key of `memory.record` for one turn: the natural key of a TurnRecorded."""
    return json.dumps(["memory.record", tenant, thread, run, turn], ensure_ascii=False)


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


@dataclass(frozen=True, slots=True)
class TurnRecorded:
    """One agent turn was recorded: the user's query and the assistant's answer.

    Becomes two conversation memories of the thread. The id is the effect key
    (tenant, thread, run, turn).
    """

    type: ClassVar[str] = "TurnRecorded"
    version: ClassVar[int] = 1

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

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        _check_metadata(self.metadata)
        _check_time(self.recorded_at)

    @property
    def id(self) -> str:
        return _derive_id(record_effect_key(self.tenant, self.thread, self.run, self.turn))


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
        validate_tenant(self.tenant)
        _check_metadata(self.metadata)
        _check_time(self.recorded_at)

    @property
    def id(self) -> str:
        return _derive_id("memory.message", self.tenant, self.thread, self.source_id)


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
        validate_tenant(self.tenant)
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
        return _derive_id("memory.forget", self.tenant, self.request_id)


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
        validate_tenant(self.tenant)
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
        return _derive_id(consolidate_effect_key(self.tenant, self.memory_ids))


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
        validate_tenant(self.tenant)
        _check_time(self.cutoff)
        _check_time(self.requested_at)
        if self.min_count < 2:
            raise InvalidInputError("a consolidation group needs at least 2 members")

    @property
    def id(self) -> str:
        return _derive_id(
            "memory.consolidation-request", self.tenant, self.thread, self.run, self.turn
        )


def item_memory_id(tenant: str, namespace: tuple[str, ...], key: str) -> str:
    """The memory id of a store item: one per (tenant, namespace, key), whatever its value."""
    return _derive_id("store.item", tenant, tuple(namespace), key)


@dataclass(frozen=True, slots=True)
class ItemStored:
    """A key-value store (the LangGraph store adapter) put an item: `value` (JSON) under
    `key` in `namespace`, searchable by `text` ("" when the item is not indexed).

    Becomes one knowledge memory whose id is the item's slot (`item_memory_id`): a later put
    of the same namespace and key replaces it, and clears a forget's tombstone of the slot,
    because a new put is a new write, not a duplicate of the forgotten one. `put_id` is decided
    once by the writer, so a retried put applies once and a put of the same value again is
    still a put of its own (the log keeps every version)."""

    type: ClassVar[str] = "ItemStored"
    version: ClassVar[int] = 1

    tenant: str
    namespace: tuple[str, ...]
    key: str
    put_id: str
    value: str
    text: str
    recorded_at: datetime
    importance: float
    embedding_model: str

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        _check_time(self.recorded_at)
        object.__setattr__(self, "namespace", tuple(self.namespace))
        if not self.namespace or not self.put_id:
            raise InvalidInputError("a stored item needs a namespace and a put id")
        try:
            json.loads(self.value)
        except ValueError:
            raise InvalidInputError("a stored item's value must be JSON text") from None

    @property
    def id(self) -> str:
        return _derive_id("store.put", self.tenant, self.namespace, self.key, self.put_id)

    @property
    def memory_id(self) -> str:
        return item_memory_id(self.tenant, self.namespace, self.key)


MemoryEvent = (
    TurnRecorded
    | MessageRecorded
    | MemoryForgotten
    | MemoriesConsolidated
    | ConsolidationRequested
    | ItemStored
)

_EVENT_TYPES: dict[str, type[MemoryEvent]] = {
    cls.type: cls
    for cls in (
        TurnRecorded,
        MessageRecorded,
        MemoryForgotten,
        MemoriesConsolidated,
        ConsolidationRequested,
        ItemStored,
    )
}


def _event_fields(event: MemoryEvent) -> dict[str, Any]:
    body: dict[str, Any] = {"type": event.type, "version": event.version, "id": event.id}
    for f in dataclasses.fields(event):
        name, value = f.name, getattr(event, f.name)
        if isinstance(value, datetime):
            value = value.astimezone(UTC).isoformat()
        elif isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        body[name] = value
    return body


def encode_event(event: MemoryEvent) -> bytes:
    return json.dumps(_event_fields(event), ensure_ascii=False, separators=(",", ":")).encode()


class _WrongType(Exception):
    pass


def _typed(*types: type) -> Callable[[object], object]:
    def parse(value: object) -> object:
        if not isinstance(value, types) or isinstance(value, bool) != (bool in types):
            raise _WrongType
        return value

    return parse


def _time(value: object) -> datetime:
    if not isinstance(value, str):
        raise _WrongType
    return datetime.fromisoformat(value)  # ValueError: an invalid event, said below


def _ids(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _WrongType
    return tuple(value)


def _optional(parse: Callable[[object], object]) -> Callable[[object], object]:
    return lambda value: None if value is None else parse(value)


# Each field is parsed by its annotation (a string: this module defers annotations).
_PARSERS: dict[str, Callable[[object], object]] = {
    "str": _typed(str),
    "int": _typed(int),
    "float": _typed(int, float),
    "bool": _typed(bool),
    "datetime": _time,
    "Mapping[str, str]": _typed(dict),
    "tuple[str, ...]": _ids,
    "MemoryType": _typed(str),
    "str | None": _optional(_typed(str)),
    "datetime | None": _optional(_time),
}


def decode_event(raw: bytes) -> MemoryEvent:
    """Parse one message of the memory topic; EventDecodeError says exactly what is wrong."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EventDecodeError(f"not a JSON event: {exc}") from None
    if not isinstance(body, dict):
        raise EventDecodeError(f"an event must be a JSON object, got {type(body).__name__}")
    kind = body.get("type")
    cls = _EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise EventDecodeError(f"unknown event type {kind!r}; known: {sorted(_EVENT_TYPES)}")
    if body.get("version") != cls.version:
        raise EventVersionError(cls.type, cls.version, body.get("version"))
    values: dict[str, Any] = {}
    try:
        for f in dataclasses.fields(cls):
            if f.name not in body:
                raise EventDecodeError(f"{kind} lacks field {f.name!r}")
            try:
                values[f.name] = _PARSERS[str(f.type)](body[f.name])
            except _WrongType:
                raise EventDecodeError(
                    f"{kind}.{f.name} has the wrong type: {body[f.name]!r}"
                ) from None
        event = cls(**values)
    except (ValueError, InvalidInputError) as exc:
        if isinstance(exc, EventDecodeError):
            raise
        raise EventDecodeError(f"{kind} is invalid: {exc}") from None
    if body.get("id") != event.id:
        raise EventDecodeError(
            f"{kind} carries id {body.get('id')!r} but its fields give {event.id!r}; "
            "the event was altered or written by a faulty producer"
        )
    return event


def _memory_id(event_id: str, part: str) -> str:
    return _derive_id(event_id, part)


@singledispatch
def memories_of(event: MemoryEvent) -> tuple[Memory, ...]:
    """The memories an event writes, without embeddings. Pure: same event, same memories."""
    raise TypeError(f"no memories are defined for {type(event).__name__}")


def _written(
    event: TurnRecorded | MessageRecorded | MemoriesConsolidated,
    part: str,
    content: str,
    role: str,
    at: datetime,
    memory_type: MemoryType = MemoryType.CONVERSATION,
) -> Memory:
    """One memory an event writes; `part` names it within the event (its id's last part)."""
    return Memory(
        id=_memory_id(event.id, part),
        tenant=event.tenant,
        content=content,
        memory_type=memory_type,
        thread=event.thread,
        timestamp=at,
        importance=event.importance,
        event_id=event.id,
        role=role,
        metadata=event.metadata,
        embedding_model=event.embedding_model,
    )


@memories_of.register
def _(event: TurnRecorded) -> tuple[Memory, ...]:
    return (
        _written(event, "user", event.query, "user", event.recorded_at),
        _written(event, "assistant", event.answer, "assistant", event.recorded_at),
    )


@memories_of.register
def _(event: MessageRecorded) -> tuple[Memory, ...]:
    return (_written(event, "message", event.content, event.speaker, event.recorded_at),)


@memories_of.register
def _(event: MemoriesConsolidated) -> tuple[Memory, ...]:
    summary = _written(
        event, "summary", event.summary, "summary", event.timestamp, event.memory_type
    )
    return (summary,)


@memories_of.register
def _(event: MemoryForgotten) -> tuple[Memory, ...]:
    return ()


@memories_of.register
def _(event: ConsolidationRequested) -> tuple[Memory, ...]:
    return ()


# Where a stored item's namespace, key and value travel in its memory's metadata.
ITEM_NAMESPACE, ITEM_KEY, ITEM_VALUE = "langgraph.namespace", "langgraph.key", "langgraph.value"


@memories_of.register
def _(event: ItemStored) -> tuple[Memory, ...]:
    return (
        Memory(
            id=event.memory_id,
            tenant=event.tenant,
            content=event.text,
            memory_type=MemoryType.KNOWLEDGE,
            # LangGraph forbids "." in labels, so the joined namespace is unambiguous; it
            # lets `memstream forget --thread` forget a namespace.
            thread=".".join(event.namespace),
            timestamp=event.recorded_at,
            importance=event.importance,
            event_id=event.id,
            metadata={
                ITEM_NAMESPACE: json.dumps(list(event.namespace), ensure_ascii=False),
                ITEM_KEY: event.key,
                ITEM_VALUE: event.value,
            },
            embedding_model=event.embedding_model,
        ),
    )
