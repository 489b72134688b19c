"""Memory events: what the log says happened to a tenant's memory, and their wire format.

Every event is a frozen dataclass with a past-tense name, a schema `version`, and a
deterministic `id` derived from its effect key, so a producer retry, a redelivery or a replay
of the same effect always carries the same id and the projection applies it at most once.
Everything non-deterministic (clock readings, importance, the embedding model) is decided
before the event is written and carried in it; turning an event into memories
(`memories_of`) is a pure function.

Wire format: one UTF-8 JSON object per Kafka message, with explicit fields, `type` and
`version`. No pickles.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import singledispatch
from typing import Any, ClassVar

from memstream.errors import EventDecodeError, EventVersionError, InvalidInputError
from memstream.memory.model import Memory, MemoryType
from memstream.memory.tenancy import validate_tenant

__all__ = [
    "MemoryEvent",
    "MessageRecorded",
    "TurnRecorded",
    "decode_event",
    "encode_event",
    "memories_of",
    "record_effect_key",
]

# Fixed forever: changing it changes every id and breaks apply-once across a replay.
_ID_NAMESPACE = uuid.UUID("6f1b3f1e-8d7c-5b8e-9a61-4d2f0c3b7a10")


def _derive_id(*parts: object) -> str:
    # JSON keeps the parts apart unambiguously ("a|b","c" vs "a","b|c").
    return str(uuid.uuid5(_ID_NAMESPACE, json.dumps(parts, ensure_ascii=False)))


def record_effect_key(tenant: str, thread: str, run: str, turn: int) -> str:
    """The effect key of `memory.record` for one turn: the natural key of a TurnRecorded."""
    return json.dumps(["memory.record", tenant, thread, run, turn], ensure_ascii=False)


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


MemoryEvent = TurnRecorded | MessageRecorded

_EVENT_TYPES: dict[str, type[TurnRecorded] | type[MessageRecorded]] = {
    TurnRecorded.type: TurnRecorded,
    MessageRecorded.type: MessageRecorded,
}


def _field_names(cls: type[MemoryEvent]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _event_fields(event: MemoryEvent) -> dict[str, Any]:
    body: dict[str, Any] = {"type": event.type, "version": event.version, "id": event.id}
    for name in _field_names(type(event)):
        value = getattr(event, name)
        if isinstance(value, datetime):
            value = value.astimezone(UTC).isoformat()
        elif isinstance(value, Mapping):
            value = dict(value)
        body[name] = value
    return body


def encode_event(event: MemoryEvent) -> bytes:
    return json.dumps(_event_fields(event), ensure_ascii=False, separators=(",", ":")).encode()


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "tenant": str,
    "thread": str,
    "source_id": str,
    "run": str,
    "turn": int,
    "query": str,
    "answer": str,
    "content": str,
    "speaker": str,
    "recorded_at": str,
    "importance": (int, float),
    "embedding_model": str,
    "metadata": dict,
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
    for name in _field_names(cls):
        if name not in body:
            raise EventDecodeError(f"{kind} lacks field {name!r}")
        value = body[name]
        expected = _FIELD_TYPES[name]
        if not isinstance(value, expected) or isinstance(value, bool):
            raise EventDecodeError(f"{kind}.{name} has the wrong type: {value!r}")
        values[name] = value
    try:
        values["recorded_at"] = datetime.fromisoformat(values["recorded_at"])
        event = cls(**values)
    except (ValueError, InvalidInputError) as exc:
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


@memories_of.register
def _(event: TurnRecorded) -> tuple[Memory, ...]:
    return tuple(
        Memory(
            id=_memory_id(event.id, role),
            tenant=event.tenant,
            content=content,
            memory_type=MemoryType.CONVERSATION,
            thread=event.thread,
            timestamp=event.recorded_at,
            importance=event.importance,
            event_id=event.id,
            role=role,
            metadata=event.metadata,
            embedding_model=event.embedding_model,
        )
        for role, content in (("user", event.query), ("assistant", event.answer))
    )


@memories_of.register
def _(event: MessageRecorded) -> tuple[Memory, ...]:
    return (
        Memory(
            id=_memory_id(event.id, "message"),
            tenant=event.tenant,
            content=event.content,
            memory_type=MemoryType.CONVERSATION,
            thread=event.thread,
            timestamp=event.recorded_at,
            importance=event.importance,
            event_id=event.id,
            role=event.speaker,
            metadata=event.metadata,
            embedding_model=event.embedding_model,
        ),
    )
