"""Memories extracted: what a chat model derived from one recorded turn (`MemoriesExtracted`).

The extraction job (streams.extraction) asks the model once per turn and writes its answer
here; from then on the facts are events like any other, so projecting, replaying,
re-embedding and resharding them never calls a model again (docs/memory.md, "Extraction").
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, ClassVar

from memstream.errors import InvalidInputError
from memstream.memory.events.base import (
    Applies,
    EventType,
    Origin,
    check_metadata,
    check_time,
    derive_id,
    written_memory,
)
from memstream.memory.model import (
    ENTITIES,
    EVENT_DATE,
    EXTRACTED_FROM,
    EXTRACTION_STRATEGY,
    SUBJECT,
    TOPICS,
    Memory,
    MemoryType,
)
from memstream.memory.tenancy import validate_tenant


class FactKind(enum.StrEnum):
    """What an extracted memory is: a fact about the user or the world, a preference, or an
    event that happened on a date (agent-memory-server's semantic and episodic memories)."""

    FACT = "fact"
    PREFERENCE = "preference"
    EVENT = "event"

    @property
    def memory_type(self) -> MemoryType:
        # Facts and preferences are semantic memories, events episodic (server.mapping).
        return MemoryType.CUSTOM if self is FactKind.EVENT else MemoryType.USER_FACT


@dataclass(frozen=True, slots=True)
class ExtractedFact:
    """One memory a model derived: its text (standalone: names, not pronouns), its kind, the
    day it happened on for an event (resolved from the turn's own date), its topics, the
    entities it names, and what it is about (`subject`, a few words: a later fact or
    preference about the same subject supersedes it, memory.validity; "": none named)."""

    text: str
    kind: FactKind = FactKind.FACT
    event_date: datetime | None = None
    topics: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    subject: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FactKind(self.kind))
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "entities", tuple(self.entities))
        if not self.text.strip():
            raise InvalidInputError("an extracted memory needs a non-empty text")
        if self.event_date is not None:
            check_time(self.event_date)


@dataclass(frozen=True, slots=True)
class MemoriesExtracted:
    """A model read one recorded turn (`source`, the event that recorded it) and derived
    `facts` from it, which become memories of the turn's thread, dated as the turn.

    Decided once by the extraction job and carried here whole: the model's name, the strategy
    and prompt version it ran under, the tokens it spent. The id is the source, strategy,
    prompt version and model: one extraction per turn and way of extracting, whichever worker
    asks, however often (an empty `facts` says the model found nothing, so nobody asks again).
    `source_memories` are the ids of the memories the turn wrote: where each fact came from.
    `replaces` are the memories of earlier extractions of the turn that these facts take the
    place of (a reextraction's, `memstream reextract`): whichever are still held go as the
    facts are written, in one step; empty for a first extraction.
    """

    type: ClassVar[str] = "MemoriesExtracted"
    version: ClassVar[int] = 2

    tenant: str
    thread: str
    source: str
    source_memories: tuple[str, ...]
    run: str
    turn: int | None
    facts: tuple[ExtractedFact, ...]
    strategy: str
    prompt_version: str
    model: str
    recorded_at: datetime
    extracted_at: datetime
    importance: float
    embedding_model: str
    input_tokens: int = 0
    output_tokens: int = 0
    metadata: Mapping[str, str] = field(default_factory=dict)
    replaces: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_metadata(self.metadata)
        check_time(self.recorded_at)
        check_time(self.extracted_at)
        object.__setattr__(self, "source_memories", tuple(self.source_memories))
        object.__setattr__(self, "replaces", tuple(self.replaces))
        object.__setattr__(self, "facts", tuple(self.facts))
        if not self.source or not self.strategy or not self.model:
            raise InvalidInputError("an extraction names its source event, strategy and model")

    @property
    def id(self) -> str:
        return extraction_id(
            self.tenant, self.source, self.strategy, self.prompt_version, self.model
        )


def extraction_id(tenant: str, source: str, strategy: str, prompt_version: str, model: str) -> str:
    """The id of the extraction of event `source` this way: known before the model is asked,
    so the job can see that a turn was extracted already and not ask again."""
    return derive_id("memory.extract", tenant, source, strategy, prompt_version, model)


def _fact_memories(event: MemoriesExtracted, event_id: str) -> tuple[Memory, ...]:
    sources = json.dumps(list(event.source_memories))
    written = []
    for index, fact in enumerate(event.facts):
        metadata = {**event.metadata, EXTRACTED_FROM: sources, EXTRACTION_STRATEGY: event.strategy}
        if fact.topics:
            metadata[TOPICS] = json.dumps(list(fact.topics), ensure_ascii=False)
        if fact.entities:
            metadata[ENTITIES] = json.dumps(list(fact.entities), ensure_ascii=False)
        if fact.event_date is not None:
            metadata[EVENT_DATE] = fact.event_date.astimezone(UTC).isoformat()
        # An event happened and stays so; what holds of the user or the world can change.
        if fact.subject and fact.kind is not FactKind.EVENT:
            metadata[SUBJECT] = fact.subject
        memory = written_memory(
            event, derive_id(event_id, "fact", index), fact.text, fact.kind.value,
            event.recorded_at, fact.kind.memory_type, event_id=event_id,
        )  # fmt: skip
        written.append(replace(memory, metadata=metadata))
    return tuple(written)


def _upcast_extracted_v1_v2(body: dict[str, Any]) -> dict[str, Any]:
    # v2 facts may name a subject, and a v2 extraction may replace an earlier one's memories;
    # a v1 event did neither, so it reads as it was.
    return body


MEMORIES_EXTRACTED = EventType(
    MemoriesExtracted,
    effect="memory.extract",
    applies=Applies.REPLACE,
    memories=_fact_memories,
    upcasters=(_upcast_extracted_v1_v2,),
    sealed=("facts", "metadata"),
    origin=lambda e: Origin(
        e.thread, e.recorded_at, e.run, e.turn, replaced=e.replaces, derived=e.source_memories
    ),
)


# This family's types: the registry's rows and the `MemoryEvent` union take them from here.
Extraction = MemoriesExtracted
ROWS = (MEMORIES_EXTRACTED,)
