"""The wire format of the HTTP API: agent-memory-server's long-term records, requests and
responses, with its field names, so its client (`agent-memory-client`) and code written
against it work unchanged.

Requests refuse fields they do not know (`extra="forbid"`): a misspelt filter must not
silently widen a search or a forget. Fields AMS defines but memstream does not use are
accepted and documented as ignored (docs/server.md). Filters accept both AMS's server
vocabulary (`eq`, `ne`, `any`, `all`) and the one its 0.14 client sends (`in_`, `not_eq`,
`not_in`).
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memstream.memory.moments import as_utc

__all__ = [
    "MEMORY_ID_PATTERN",
    "AckResponse",
    "CreateMemoryRecordRequest",
    "DateFilter",
    "EditMemoryRecordRequest",
    "ForgetPolicy",
    "ForgetRequest",
    "ForgetResponse",
    "HealthCheckResponse",
    "MemoryPromptRequest",
    "MemoryPromptResponse",
    "MemoryRecord",
    "MemoryRecordResult",
    "MemoryRecordResults",
    "MemoryTypeEnum",
    "MemoryTypeFilter",
    "PromptMessage",
    "PromptSession",
    "SearchModeEnum",
    "SearchRequest",
    "TagFilter",
    "TextContent",
]

_STRICT = ConfigDict(extra="forbid")
# The same rule as memory.events.check_memory_id, stated here so the OpenAPI document shows it.
MEMORY_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


def _now() -> datetime:
    return datetime.now(UTC)


_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST = datetime(3000, 1, 1, tzinfo=UTC)


def _in_range(at: datetime) -> datetime:
    """A memory's time in UTC (no zone: UTC), within what its eviction order can sort."""
    at = as_utc(at)
    try:
        utc = at.astimezone(UTC)
    except OverflowError:
        utc = _LATEST  # only the edges of datetime's range overflow; refused just below
    if not _EARLIEST <= utc < _LATEST:
        raise ValueError("must be between 1970-01-01 and 3000-01-01 (UTC)")
    return utc


def _utc(at: datetime) -> datetime:
    at = as_utc(at)
    try:
        return at.astimezone(UTC)
    except OverflowError:
        raise ValueError("is outside the range of dates") from None


# A topic, entity or source id: AMS keeps them comma-free (commas separate its TAG values).
Tag = Annotated[str, Field(pattern=r"^[^,]*$")]
# A value a filter compares with.
Value = Annotated[str, Field(min_length=1)]
# Client metadata keys; `ams.` keys hold the AMS fields memstream keeps (server.mapping).
MetadataKey = Annotated[str, Field(pattern=r"^(?!ams\.)")]
# Times a stored memory carries, and times a filter compares with.
Instant = Annotated[datetime, AfterValidator(_in_range)]
FilterInstant = Annotated[datetime, AfterValidator(_utc)]


class MemoryTypeEnum(enum.StrEnum):
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    MESSAGE = "message"


class SearchModeEnum(enum.StrEnum):
    SEMANTIC = "semantic"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


class MemoryRecord(BaseModel):
    """A long-term memory as AMS defines it. `id` is the client's: its idempotency key."""

    # Python's regex engine: metadata keys are checked with a lookahead.
    model_config = ConfigDict(extra="forbid", regex_engine="python-re")

    id: str = Field(
        pattern=MEMORY_ID_PATTERN,
        description="Client-provided id: the idempotency key and the handle",
    )
    text: str = Field(min_length=1, pattern=r"\S", description="Not blank")
    session_id: str | None = None
    user_id: str | None = None
    namespace: str | None = None
    last_accessed: datetime = Field(default_factory=_now, description="Ignored on input")
    created_at: Instant = Field(default_factory=_now)
    updated_at: datetime = Field(default_factory=_now, description="Ignored on input")
    pinned: bool = Field(default=False, description="Pinned memories are evicted last")
    access_count: int = Field(default=0, ge=0, description="Ignored on input")
    topics: list[Tag] | None = None
    entities: list[Tag] | None = None
    memory_hash: str | None = Field(default=None, description="Ignored on input")
    discrete_memory_extracted: Literal["t", "f"] = "t"
    memory_type: MemoryTypeEnum = MemoryTypeEnum.SEMANTIC
    persisted_at: datetime | None = Field(default=None, description="Server-assigned")
    extracted_from: list[Tag] | None = None
    event_date: Instant | None = None
    extraction_strategy: str = "discrete"
    extraction_strategy_config: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[MetadataKey, str] = Field(default_factory=dict)
    importance: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="memstream: 0-1, lowest evicted first (default: the server's, 1 if pinned)",
    )


class MemoryProvenance(BaseModel):
    """memstream: where a memory came from (docs/lineage.md). The log position is null for a
    memory that never went through the log; `replaced` lists what a summary replaced."""

    event_id: str
    event_type: str
    event_version: int
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    thread: str
    run: str | None = None
    turn: int | None = None
    recorded_at: datetime
    replaced: list[str] | None = None


class StoredMemoryRecord(MemoryRecord):
    """A stored memory as the API returns it: AMS's record and memstream's `provenance` (an
    extra field, which AMS clients ignore)."""

    provenance: MemoryProvenance | None = Field(
        default=None, description="memstream: where the memory came from; ignored on input"
    )


class CreateMemoryRecordRequest(BaseModel):
    model_config = _STRICT

    memories: list[MemoryRecord] = Field(min_length=1)
    deduplicate: bool = Field(
        default=True, description="Accepted; memstream never writes one id twice either way"
    )


class EditMemoryRecordRequest(BaseModel):
    """AMS's edit: the fields to change; the rest of the memory, and any field sent as null,
    stays as it is."""

    model_config = ConfigDict(extra="forbid", regex_engine="python-re")

    text: str | None = Field(default=None, min_length=1, pattern=r"\S")
    topics: list[Tag] | None = None
    entities: list[Tag] | None = None
    memory_type: MemoryTypeEnum | None = None
    namespace: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    event_date: Instant | None = None
    pinned: bool | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)


class AckResponse(BaseModel):
    status: str


class HealthCheckResponse(BaseModel):
    now: int


class TagFilter(BaseModel):
    """Equality and set filters on a string field (AMS's and its client's names)."""

    model_config = _STRICT

    eq: Value | None = None
    ne: Value | None = None
    any: list[Value] | None = None
    all: list[Value] | None = None
    in_: list[Value] | None = None
    not_eq: Value | None = None
    not_in: list[Value] | None = None
    none: list[Value] | None = None
    startswith: Value | None = Field(default=None, description="A prefix of the value (AMS 0.15)")


class MemoryTypeFilter(BaseModel):
    model_config = _STRICT

    eq: MemoryTypeEnum | None = None
    ne: MemoryTypeEnum | None = None
    any: list[MemoryTypeEnum] | None = None
    all: list[MemoryTypeEnum] | None = None
    in_: list[MemoryTypeEnum] | None = None
    not_eq: MemoryTypeEnum | None = None
    not_in: list[MemoryTypeEnum] | None = None
    none: list[MemoryTypeEnum] | None = None


class DateFilter(BaseModel):
    model_config = _STRICT

    gt: FilterInstant | None = None
    lt: FilterInstant | None = None
    gte: FilterInstant | None = None
    lte: FilterInstant | None = None
    eq: FilterInstant | None = None
    between: list[FilterInstant] | None = Field(default=None, min_length=2, max_length=2)


_RERANK = "sent: the page is reordered by AMS's recency rerank; unsent: memstream's ranking"


class SearchRequest(BaseModel):
    model_config = _STRICT

    text: str | None = None
    search_mode: SearchModeEnum = SearchModeEnum.HYBRID
    hybrid_alpha: float = Field(
        default=0.7,
        ge=0.0,
        le=1.0,
        description="hybrid: the weight of meaning against words (0: words alone, 1: meaning "
        "alone); unsent, memstream's tuned fusion decides",
    )
    text_scorer: str = Field(
        default="BM25",
        description="keyword mode: RediSearch's scorer (BM25, BM25STD, TFIDF, TFIDF.DOCNORM, "
        "DISMAX, DOCSCORE, HAMMING); hybrid ranks words by the tenant's own BM25",
    )
    session_id: TagFilter | None = None
    namespace: TagFilter | None = None
    topics: TagFilter | None = None
    entities: TagFilter | None = None
    created_at: DateFilter | None = None
    last_accessed: DateFilter | None = Field(default=None, description="As created_at")
    user_id: TagFilter | None = None
    distance_threshold: float | None = Field(default=None, ge=0.0, le=2.0)
    memory_type: MemoryTypeFilter | None = None
    extraction_strategy: TagFilter | None = None
    event_date: DateFilter | None = None
    limit: int = Field(default=10, ge=1, le=100)
    offset: int = Field(default=0, ge=0, le=900, description="offset + limit stay within 1000")
    # AMS's recency rerank of the page, applied when one of these is sent (server.mapping).
    recency_boost: bool | None = Field(default=None, description=_RERANK)
    recency_semantic_weight: float | None = Field(default=None, description=_RERANK)
    recency_recency_weight: float | None = Field(default=None, description=_RERANK)
    recency_freshness_weight: float | None = Field(default=None, description=_RERANK)
    recency_novelty_weight: float | None = Field(default=None, description=_RERANK)
    recency_half_life_last_access_days: float | None = Field(default=None, description=_RERANK)
    recency_half_life_created_days: float | None = Field(default=None, description=_RERANK)
    server_side_recency: bool | None = Field(default=None, description=_RERANK)
    as_of: datetime | None = Field(
        default=None,
        description="memstream: search the tenant's memory as it stood at this time (hybrid, "
        "no filters; what was forgotten since stays gone: docs/lineage.md)",
    )


class HistoryEntry(BaseModel):
    """One change to a memory, by the event of the log at `topic`/`partition`@`offset`."""

    memory_id: str
    change: str
    at: datetime
    event_id: str
    event_type: str
    event_version: int
    topic: str
    partition: int
    offset: int
    related: list[str] = Field(
        description="consolidated: the summary it went into; a summary: the ids it replaced"
    )


class MemoryHistory(BaseModel):
    """memstream: every event of the log that touched one memory, oldest first."""

    id: str
    history: list[HistoryEntry]


class MemoryRecordResult(StoredMemoryRecord):
    model_config = ConfigDict(extra="ignore")

    dist: float
    score: float | None = None
    score_type: SearchModeEnum | None = None
    subject: str | None = Field(
        default=None, description="memstream: what an extracted fact is about (docs/memory.md)"
    )
    valid_to: datetime | None = Field(
        default=None,
        description="memstream: when a later fact about the same subject superseded this one "
        "(null: it still holds); a hybrid search ranks what no longer holds lower",
    )


class MemoryRecordResults(BaseModel):
    memories: list[MemoryRecordResult]
    total: int
    next_offset: int | None = None


class ForgetPolicy(BaseModel):
    model_config = _STRICT

    max_age_days: float | None = Field(default=None, ge=0, le=100_000)
    max_inactive_days: float | None = Field(
        default=None, ge=0, le=100_000, description="As max_age_days"
    )
    budget: int | None = Field(default=None, ge=0, description="Keep the newest N; 0: all go")
    memory_type_allowlist: list[MemoryTypeEnum] | None = None
    hard_age_multiplier: float | None = Field(default=None, description="Ignored")


class ForgetRequest(BaseModel):
    model_config = _STRICT

    policy: ForgetPolicy
    pinned_ids: list[str] | None = None


class ForgetResponse(BaseModel):
    scanned: int
    deleted: int
    deleted_ids: list[str]
    dry_run: bool


class PromptSession(BaseModel):
    model_config = _STRICT

    session_id: str
    # The session's namespace or user id scopes the search as a filter value would, so it is
    # one: an empty one is refused here (it gave a 500 once it reached the filter).
    namespace: Value | None = None
    user_id: Value | None = None
    model_name: str | None = Field(default=None, description="The window of the session's messages")
    context_window_max: int | None = Field(
        default=None, ge=1, description="The window in tokens (over model_name)"
    )
    long_term_memory_strategy: dict[str, Any] | None = Field(default=None, description="Ignored")


class MemoryPromptRequest(BaseModel):
    model_config = _STRICT

    query: str
    session: PromptSession | None = None
    long_term_search: SearchRequest | bool | None = None
    max_recall_tokens: int = Field(
        default=600,
        ge=1,
        le=32_000,
        description="memstream: the section's budget in tokens (4 characters each)",
    )


class TextContent(BaseModel):
    type: Literal["text"] = "text"
    text: str


class PromptMessage(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: TextContent


class MemoryPromptResponse(BaseModel):
    messages: list[PromptMessage]
    long_term_memories: list[MemoryRecordResult] | None = None
