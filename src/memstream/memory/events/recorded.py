"""Memories recorded: an agent turn (`TurnCompleted`), a message outside one
(`MessageRecorded`), a memory saved by id (`MemorySaved`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from memstream.errors import InvalidInputError
from memstream.memory.events.base import (
    ID_JSON,
    Applies,
    EventType,
    Origin,
    check_metadata,
    check_time,
    derive_id,
    record_effect_key,
    written_memory,
)
from memstream.memory.model import Memory, MemoryType
from memstream.memory.tenancy import validate_tenant


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
        check_metadata(self.metadata)
        check_time(self.recorded_at)
        object.__setattr__(self, "shown", tuple(self.shown))

    @property
    def id(self) -> str:
        # Not `shown` nor `echo`: what recall showed is not part of which turn this is, so
        # a retried turn is the same event whatever it was shown.
        return derive_id(record_effect_key(self.tenant, self.thread, self.run, self.turn))


def _turn_memories(event: TurnCompleted, event_id: str) -> tuple[Memory, ...]:
    at = event.recorded_at
    query = written_memory(
        event, derive_id(event_id, "user"), event.query, "user", at, event_id=event_id
    )
    if event.echo:  # the answer restated what the turn was shown: the user's words only
        return (query,)
    answer = derive_id(event_id, "assistant")
    return (query, written_memory(event, answer, event.answer, "assistant", at, event_id=event_id))


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
        check_metadata(self.metadata)
        check_time(self.recorded_at)

    @property
    def id(self) -> str:
        return derive_id("memory.message", self.tenant, self.thread, self.source_id)


def _message_memories(event: MessageRecorded, event_id: str) -> tuple[Memory, ...]:
    memory_id = derive_id(event_id, "message")
    return (
        written_memory(
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
        check_metadata(self.metadata)
        check_time(self.saved_at)
        object.__setattr__(self, "memory_type", MemoryType(self.memory_type))
        if not self.content.strip():
            raise InvalidInputError(f"memory {self.memory_id!r} has no text; say what to keep")

    @property
    def id(self) -> str:
        revision = ID_JSON.encode(
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
        written_memory(
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


# This family's types: the registry's rows and the `MemoryEvent` union take them from here, so
# a new type of the family is its class, its row and its place in these two.
Recorded = TurnCompleted | MessageRecorded | MemorySaved
ROWS = (TURN_COMPLETED, MESSAGE_RECORDED, MEMORY_SAVED)
