"""The domain's nouns: a Memory and its type, as the projection stores and recall returns them."""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a memory's provenance is worked out from its event, which holds memories
    from memstream.memory.provenance import Provenance


__all__ = [
    "DEFAULT_IMPORTANCE",
    "DEFAULT_MAX_RECORD_CHARS",
    "ENTITIES",
    "EVENT_DATE",
    "EXTRACTED_FROM",
    "EXTRACTION_STRATEGY",
    "LONG_TERM_PROMPT",
    "LONG_TERM_STRATEGY",
    "RESERVED_PREFIX",
    "SUBJECT",
    "TOPICS",
    "Memory",
    "MemoryType",
    "RecalledMemory",
    "ScoreParts",
    "derived_from",
]

# The defaults of the knobs the domain has; Settings and every config refer to these.
DEFAULT_IMPORTANCE = 0.5  # of a memory nobody scored
DEFAULT_MAX_RECORD_CHARS = 8_000  # the most characters (code points) one memory holds

# A memory record's fields beyond its text, kept in its metadata under a reserved prefix by
# agent-memory-server's names (the HTTP API maps them one to one; extraction writes them). A
# client's own metadata keys never start with the prefix.
RESERVED_PREFIX = "ams."
TOPICS = "ams.topics"  # a JSON array of strings, as ENTITIES and EXTRACTED_FROM
ENTITIES = "ams.entities"
EVENT_DATE = "ams.event_date"  # ISO-8601, UTC: the day an episodic memory's event happened
EXTRACTED_FROM = "ams.extracted_from"  # the ids of the memories it was derived from
EXTRACTION_STRATEGY = "ams.extraction_strategy"  # absent: stored whole ("discrete")
# What an extracted fact is about, in a few words: a later fact about the same subject
# supersedes it (memory.validity).
SUBJECT = "ams.subject"
# On a turn recorded from a working-memory session: how the session asks to be extracted
# (its `long_term_memory_strategy`), and a custom strategy's prompt.
LONG_TERM_STRATEGY = "ams.long_term_memory_strategy"
LONG_TERM_PROMPT = "ams.long_term_memory_prompt"


class MemoryType(enum.StrEnum):
    CONVERSATION = "conversation"
    ENTITY = "entity"
    KNOWLEDGE = "knowledge"
    USER_FACT = "user_fact"
    TASK = "task"
    CUSTOM = "custom"

    @property
    def kind(self) -> str:
        """The coarse kind (the CoALA taxonomy AMS uses): `message` for what was said,
        `semantic` for facts, `episodic` for what happened or was done."""
        return _KINDS[self]


_KINDS = {
    MemoryType.CONVERSATION: "message",
    MemoryType.USER_FACT: "semantic",
    MemoryType.ENTITY: "semantic",
    MemoryType.KNOWLEDGE: "semantic",
    MemoryType.TASK: "episodic",
    MemoryType.CUSTOM: "episodic",
}


@dataclass(frozen=True, slots=True)
class Memory:
    """One remembered piece of text of one tenant.

    `id` is derived from the event that wrote it, so replaying the log rebuilds the same ids.
    `role` says who said it in a conversation ("user", "assistant", or an imported speaker).
    `facets` are texts searched apart, each by a vector of its own, the memory scoring by its
    best (a store item's indexed fields; empty: the content alone). `expires_at` is when the
    memory lapses unless a read refreshes it (a store item's TTL; None: never). `provenance`
    says which event, at which log position, made it (None: not known, as for a memory built
    from an event before it was applied).
    """

    id: str
    tenant: str
    content: str
    memory_type: MemoryType
    thread: str
    timestamp: datetime
    importance: float
    event_id: str
    role: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    embedding_model: str = ""
    facets: tuple[str, ...] = ()
    expires_at: datetime | None = None
    provenance: Provenance | None = None


@dataclass(frozen=True, slots=True)
class RecalledMemory:
    """A memory returned by recall, with its relevance `score` (higher is more relevant) and,
    for a fact a later one superseded, when it stopped holding (`valid_to`, memory.validity;
    None: it still holds, or it is no such fact). A hybrid recall also says what the score was
    made of (`parts`: its words and its meaning, ranking.fusion; None for other searches)."""

    memory: Memory
    score: float
    valid_to: datetime | None = None
    parts: ScoreParts | None = None


@dataclass(frozen=True, slots=True)
class ScoreParts:
    """What a hybrid score was fused from: `words`, the memory's BM25 over the best among the
    candidates (0..1; 0: no word of the query), and `meaning`, its cosine with the query."""

    words: float
    meaning: float


def derived_from(memory: Memory) -> tuple[str, ...]:
    """The ids of the memories `memory` was derived from (EXTRACTED_FROM; none for a memory
    stored as it was given). Forgetting one of them forgets it too."""
    raw = memory.metadata.get(EXTRACTED_FROM)
    if not raw:
        return ()
    return _id_list(raw)


@functools.lru_cache(maxsize=4096)
def _id_list(raw: str) -> tuple[str, ...]:
    try:
        ids = json.loads(raw)
    except ValueError:
        return ()  # a client's malformed field: it names nothing
    return tuple(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else ()
