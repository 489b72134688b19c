"""Memory events: what the log says happened to a tenant's memory, and their wire format.

Every event is a frozen dataclass with a past-tense name, a schema `version`, and a
deterministic `id` derived from its effect key, so a producer retry, a redelivery or a replay
of the same effect always carries the same id and the projection applies it at most once.
Everything non-deterministic (clock readings, importance, the embedding model) is decided
before the event is written and carried in it; turning an event into memories
(`memories_of`) is a pure function.

Three kinds of effect reach the log: memories recorded (`TurnRecorded`, `MessageRecorded`,
`MemorySaved` under a client's own id),
memories forgotten (`MemoryForgotten`, the users' right to erasure) and groups of memories
replaced by a summary (`MemoriesConsolidated`, decided once by the consolidation job).

Wire format: one UTF-8 JSON object per Kafka message, with explicit fields, `type` and
`version`. No pickles. Each field is decoded by the parser of its annotated type.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
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
    "ConsolidationRequested",
    "MemoriesConsolidated",
    "MemoryEvent",
    "MemoryForgotten",
    "MemorySaved",
    "MessageRecorded",
    "TurnRecorded",
    "check_memory_id",
    "consolidate_effect_key",
    "decode_event",
    "encode_event",
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
        validate_tenant(self.tenant)
        check_memory_id(self.memory_id)
        _check_metadata(self.metadata)
        _check_time(self.saved_at)
        object.__setattr__(self, "memory_type", MemoryType(self.memory_type))
        if not self.content.strip():
            raise InvalidInputError(f"memory {self.memory_id!r} has no text; say what to keep")

    @property
    def id(self) -> str:
        revision = json.dumps(
            [
                self.thread,
                self.content,
                self.memory_type.value,
                self.role,
                self.saved_at.astimezone(UTC).isoformat(),
                self.importance,
                self.embedding_model,
                sorted(self.metadata.items()),
            ],
            ensure_ascii=False,
        )
        digest = hashlib.sha256(revision.encode()).hexdigest()
        return _derive_id("memory.save", self.tenant, self.memory_id, digest)


MemoryEvent = (
    TurnRecorded
    | MessageRecorded
    | MemoryForgotten
    | MemoriesConsolidated
    | ConsolidationRequested
    | MemorySaved
)

_EVENT_TYPES: dict[str, type[MemoryEvent]] = {
    cls.type: cls
    for cls in (
        TurnRecorded,
        MessageRecorded,
        MemoryForgotten,
        MemoriesConsolidated,
        ConsolidationRequested,
        MemorySaved,
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
    event: TurnRecorded | MessageRecorded | MemoriesConsolidated | MemorySaved,
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


@memories_of.register
def _(event: MemorySaved) -> tuple[Memory, ...]:
    saved = _written(event, "saved", event.content, event.role, event.saved_at, event.memory_type)
    # The client's id is the memory's id: it is how the client gets or deletes it later.
    return (dataclasses.replace(saved, id=event.memory_id),)
