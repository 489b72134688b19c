"""The wire format of working memory: agent-memory-server's `WorkingMemory`, its messages, the
put request and the responses, with its field names and defaults, so agent-memory-client's
working-memory calls work unchanged.

A put accepts every field the client sends (it puts back what it read, percentages
included) and refuses others. memstream adds `version` to what it answers: send it back with
a put to replace the session only if nobody changed it since (409 otherwise); a put without it
merges messages appended meanwhile (memory.working.merge_messages).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memstream.server.models import Instant, MemoryRecord

__all__ = [
    "SESSION_FIELDS",
    "SESSION_ID_PATTERN",
    "AppendMessagesRequest",
    "MemoryMessage",
    "MemoryStrategyConfig",
    "SessionListResponse",
    "UpdateWorkingMemory",
    "WorkingMemory",
    "WorkingMemoryResponse",
]

_STRICT = ConfigDict(extra="forbid")
# A session id is a thread and part of a Redis key: printable, no spaces, bounded.
SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,255}$"
# The most seconds a session may live without a put (AMS: no limit; a year here).
MAX_TTL_S = 366 * 24 * 3600


def _now() -> datetime:
    return datetime.now(UTC)


class MemoryMessage(BaseModel):
    model_config = _STRICT

    role: str = Field(min_length=1, max_length=64)
    content: str = Field(min_length=1, pattern=r"\S", description="Not blank")
    id: str = Field(
        default_factory=lambda: uuid.uuid4().hex,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
        description="The message's identity: a message sent again under its id is the same one",
    )
    created_at: Instant = Field(default_factory=_now)
    persisted_at: datetime | None = Field(default=None, description="Ignored on input")
    discrete_memory_extracted: Literal["t", "f"] = Field(default="f", description="Ignored")


class MemoryStrategyConfig(BaseModel):
    model_config = _STRICT

    strategy: Literal["discrete", "summary", "preferences", "custom"] = "discrete"
    config: dict[str, Any] = Field(default_factory=dict)


class _Session(BaseModel):
    """The fields a session's working memory has, on the way in and out."""

    messages: list[MemoryMessage] = Field(default_factory=list)
    memories: list[MemoryRecord] = Field(
        default_factory=list, description="Structured memories: each saved as long-term memory"
    )
    data: dict[str, Any] | None = None
    context: str | None = Field(default=None, description="Summary of messages out of the window")
    user_id: str | None = None
    tokens: int = Field(default=0, ge=0)
    namespace: str | None = None
    long_term_memory_strategy: MemoryStrategyConfig = Field(
        default_factory=MemoryStrategyConfig,
        description="How the extraction job derives memories from the session's exchanges "
        "(with MEMSTREAM_EXTRACTION on for the tenant); custom: config.custom_prompt",
    )
    ttl_seconds: int | None = Field(
        default=None, ge=1, le=MAX_TTL_S, description="Seconds without a put before it expires"
    )
    last_accessed: Instant = Field(default_factory=_now)
    created_at: Instant = Field(default_factory=_now)
    updated_at: Instant = Field(default_factory=_now)


# The fields a put's body and a stored session share.
SESSION_FIELDS = tuple(_Session.model_fields)


class UpdateWorkingMemory(_Session):
    """A put: the whole session. `session_id`, when sent, must be the path's."""

    model_config = _STRICT

    session_id: str | None = None
    version: int | None = Field(
        default=None,
        ge=0,
        description="memstream: the version read; replace only if still current (else 409). "
        "0: only if the session does not exist. None: merge messages appended meanwhile",
    )
    context_percentage_total_used: float | None = Field(default=None, description="Ignored")
    context_percentage_until_summarization: float | None = Field(
        default=None, description="Ignored"
    )
    new_session: bool | None = Field(default=None, description="Ignored")
    unsaved: bool | None = Field(default=None, description="Ignored")


class WorkingMemory(_Session):
    session_id: str


class WorkingMemoryResponse(WorkingMemory):
    context_percentage_total_used: float | None = None
    context_percentage_until_summarization: float | None = None
    version: int = Field(description="memstream: send it back with a put to replace safely")


class AppendMessagesRequest(BaseModel):
    """memstream: messages to add at the end of a session, atomically."""

    model_config = _STRICT

    messages: list[MemoryMessage] = Field(min_length=1)


class SessionListResponse(BaseModel):
    sessions: list[str]
    total: int
