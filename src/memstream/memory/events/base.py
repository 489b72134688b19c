"""What every event type is: its deterministic id, the row (`EventType`) that says how it is
read, written and applied, and where its memories come from (`Origin`)."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from json.encoder import encode_basestring
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from memstream.errors import InvalidInputError
from memstream.memory.model import Memory, MemoryType, derived_from

# Fixed forever: changing it changes every id and breaks apply-once across a replay.
ID_NAMESPACE = uuid.UUID("6f1b3f1e-8d7c-5b8e-9a61-4d2f0c3b7a10")


# json.dumps(parts, ensure_ascii=False), without building an encoder on every call.
ID_JSON = json.JSONEncoder(ensure_ascii=False)
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
            return ID_JSON.encode(parts)
    return "[" + ", ".join(written) + "]"


@lru_cache(maxsize=8192)
def record_effect_key(tenant: str, thread: str, run: str, turn: int) -> str:
    """The effect key of `memory.record` for one turn: the natural key of a TurnCompleted."""
    return _id_json(("memory.record", tenant, thread, run, turn))


def consolidate_effect_key(tenant: str, memory_ids: tuple[str, ...]) -> str:
    """The effect key of `memory.consolidate`: the tenant and the group's sorted memory ids."""
    return json.dumps(["memory.consolidate", tenant, *sorted(memory_ids)], ensure_ascii=False)


def check_metadata(metadata: Mapping[str, str]) -> None:
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidInputError(
                f"metadata must map strings to strings; {key!r}: {value!r} is not; "
                "convert numbers and lists to text first"
            )


def check_time(at: datetime) -> None:
    if at.tzinfo is None:
        raise InvalidInputError(
            f"timestamp {at.isoformat()} has no time zone; give it one (UTC is usual)"
        )


class Applies(enum.StrEnum):
    """How the projection applies an event (the kinds apply_once.lua knows)."""

    RECORD = "record"  # write the event's memories (none for a request: only its marker)
    FORGET = "forget"  # delete and tombstone the memories the event selects
    CONSOLIDATE = "consolidate"  # replace a group with the summary, if every member is there
    # write the event's memories in place of those it names, whichever are still held (a
    # reextraction's facts in place of the turn's earlier ones)
    REPLACE = "replace"
    PUT = "put"  # write a store item's memory into its slot, replacing what the slot held
    ERASE = "erase"  # delete the whole tenant: its memories and tombstones
    EXPIRE = "expire"  # delete a store item whose put lapsed, if the slot still holds it
    # put or remove tenant documents beside the memories (a summary view, a task, a result)
    DOCUMENT = "document"


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
    (memory.provenance): the thread (a store item's namespace, dotted), when, the agent run and
    turn if a turn wrote them, the memories a summary replaced, and those an extracted fact
    was derived from (which stay)."""

    thread: str
    at: datetime
    run: str = ""
    turn: int | None = None
    replaced: tuple[str, ...] = ()
    derived: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Selection:
    """The memories a forget removes and tombstones, chosen when it is applied (so a replay
    chooses the same): these ids (tombstoned even if not stored) and what was derived from
    them (an extracted fact goes with the turn it came from), or those of `thread` and/or
    written `before`, or every one."""

    ids: tuple[str, ...] = ()
    thread: str | None = None
    before: datetime | None = None
    everything: bool = False

    def chooses(self, memory: Memory) -> bool:
        if self.everything or memory.id in self.ids:
            return True
        if self.ids:
            return any(source in self.ids for source in derived_from(memory))
        if self.thread is None and self.before is None:
            return False
        return (self.thread is None or memory.thread == self.thread) and (
            self.before is None or memory.timestamp < self.before
        )


@dataclass(frozen=True, slots=True)
class Lapse:
    """A store item's put that ran out: the slot `memory_id` is emptied only while it still
    holds that put (`put_event_id`) with a deadline no later than `deadline`."""

    memory_id: str
    put_event_id: str
    deadline: datetime

    def ends(self, memory: Memory) -> bool:
        held_until = memory.expires_at
        return (
            memory.id == self.memory_id
            and memory.event_id == self.put_event_id
            and held_until is not None
            and held_until <= self.deadline
        )


@dataclass(frozen=True, slots=True)
class DocumentChange:
    """One tenant document a DOCUMENT event puts (`body`: its JSON) or removes (`body` None),
    by `collection` and `key`; with `key` empty and `body` None, the whole collection goes.
    Documents are what the log derives besides memories (summary views, their results, tasks,
    namespaces): read by key or by collection, rebuilt by a replay, erased with the tenant.

    `expect` makes the change conditional: the document must be `expect` now ("": absent).
    An event's changes apply all together or, where one expectation fails, none at all
    (outcome `conflict`): a compare-and-set at the event's place in the log, so two writers
    racing for one name or one revision cannot both win, in the projection or in a replay."""

    collection: str
    key: str
    body: str | None = None
    expect: str | None = None

    def __post_init__(self) -> None:
        if not self.collection or DOCUMENT_SEPARATOR in self.collection + self.key:
            raise ValueError(f"no document is named {self.collection!r}/{self.key!r}")
        if not self.key and self.body is not None:
            raise ValueError("a document put needs a key")

    @property
    def field(self) -> str:
        """Its field in the tenant's documents (a collection's fields share its prefix)."""
        return f"{self.collection}{DOCUMENT_SEPARATOR}{self.key}"


# Between a document's collection and key in its field: no id or name holds it.
DOCUMENT_SEPARATOR = "\x1f"


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
    # What a FORGET removes, and what an EXPIRE ends: set on exactly the rows that apply so.
    # (A CONSOLIDATE or REPLACE removes what its origin says it replaced; an ERASE,
    # everything.)
    selects: Callable[[E], Selection] | None = None
    lapses: Callable[[E], Lapse] | None = None
    # The documents a DOCUMENT puts or removes: set on exactly the rows that apply so.
    documents: Callable[[E], tuple[DocumentChange, ...]] | None = None

    def __post_init__(self) -> None:
        names = {f.name for f in dataclasses.fields(self.event)}  # type: ignore[arg-type]
        if not set(self.sealed) <= names:
            raise TypeError(f"{self.name} seals fields it does not have: {self.sealed}")
        if len(self.upcasters) != self.version - 1:
            raise TypeError(
                f"{self.name} is version {self.version}: it needs {self.version - 1} upcasters "
                f"(one from each older version), has {len(self.upcasters)}"
            )
        if self.origin is None and self.memories is not writes_nothing:
            raise TypeError(
                f"{self.name} writes memories: say where they come from (`origin`), or their "
                "provenance would be missing"
            )
        if (self.applies is Applies.FORGET) != (self.selects is not None):
            raise TypeError(
                f"{self.name}: a row says which memories it forgets (`selects`) "
                "exactly when it applies as a forget"
            )
        if (self.applies is Applies.EXPIRE) != (self.lapses is not None):
            raise TypeError(
                f"{self.name}: a row says which put it ends (`lapses`) exactly "
                "when it applies as an expiry"
            )

        if (self.applies is Applies.DOCUMENT) != (self.documents is not None):
            raise TypeError(
                f"{self.name}: a row says which documents it changes (`documents`) exactly "
                "when it applies as documents"
            )

    @property
    def name(self) -> str:
        return self.event.type

    def changes(self, event: E) -> tuple[DocumentChange, ...]:
        """The documents `event` puts or removes (none unless it applies as DOCUMENT)."""
        return self.documents(event) if self.documents is not None else ()

    def selection(self, event: E) -> Selection:
        """Which memories `event`, a FORGET, forgets."""
        if self.selects is None:
            raise TypeError(f"{self.name} forgets nothing")
        return self.selects(event)

    def lapse(self, event: E) -> Lapse:
        """Which store item's put `event`, an EXPIRE, ends."""
        if self.lapses is None:
            raise TypeError(f"{self.name} ends no put")
        return self.lapses(event)

    def replaced(self, event: E) -> tuple[str, ...]:
        """The memories `event` replaces with its own (a CONSOLIDATE's group, a REPLACE's
        earlier memories; none else)."""
        if self.applies not in (Applies.CONSOLIDATE, Applies.REPLACE) or self.origin is None:
            return ()
        return self.origin(event).replaced

    @property
    def version(self) -> int:
        return self.event.version


class Writing(Protocol):
    """What an event that writes memories in a thread carries for each of them."""

    @property
    def tenant(self) -> str: ...

    @property
    def thread(self) -> str: ...

    @property
    def importance(self) -> float: ...

    @property
    def metadata(self) -> Mapping[str, str]: ...

    @property
    def embedding_model(self) -> str: ...


def written_memory(
    event: Writing,
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


def writes_nothing(event: object, event_id: str) -> tuple[Memory, ...]:
    return ()
