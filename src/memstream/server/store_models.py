"""The wire format of Redis Agent Memory's store-scoped API (the `redis-agent-memory` SDK,
0.4.1): session events, long-term memory records, search filters and health, with its
camelCase field names, so the SDK works unchanged against `memstream serve`.

Requests refuse fields they do not know, as the AMS models do: a misspelt filter must not
silently widen a search or a delete. Errors are RFC 9457 problem details with the SDK's
`type` URIs (server/store_routes.py).
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from memstream.errors import InvalidInputError
from memstream.server.models import FilterInstant, Instant

__all__ = [
    "AddSessionEventRequest",
    "AttributeClause",
    "BulkCreateRequest",
    "BulkCreateResponse",
    "BulkDeleteRequest",
    "BulkDeleteResponse",
    "BulkError",
    "CreateMemory",
    "CreateNamespaceRequest",
    "FilterConjunction",
    "Health",
    "LongTermMemoryFilter",
    "MessageRole",
    "MoveRequest",
    "MoveResponse",
    "Namespace",
    "NamespaceList",
    "NamespaceRef",
    "NamespaceResponse",
    "NamespaceScope",
    "NamespaceState",
    "PlacedIn",
    "SearchRequest",
    "SearchResponse",
    "SessionEvent",
    "SessionEventResponse",
    "SessionList",
    "SessionMemory",
    "StoreHealth",
    "StoreMemory",
    "TextPart",
    "UpdateMemory",
    "UpdateMemoryFields",
    "UpdateNamespaceRequest",
    "ValueFilter",
    "page_offset",
    "page_token_at",
]


def page_token_at(offset: int) -> str:
    """The opaque page token of a listing's page that starts at `offset`."""
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def page_offset(token: str | None) -> int:
    """Where the page of `token` starts (0: none); InvalidInputError for a token not ours."""
    if token is None:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(token.encode()))["offset"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        offset = None
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInputError(
            "pageToken is not one this server gave; send the nextPageToken of the previous "
            "answer, or none for the first page"
        )
    return offset


class _Wire(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields refused."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


# An owner id as the SDK documents it: 1-64 letters, digits, dashes (and underscores).
OwnerId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
Topic = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[^,]*$")]


class MessageRole(enum.StrEnum):
    USER = "USER"
    ASSISTANT = "ASSISTANT"
    SYSTEM = "SYSTEM"


class TextPart(_Wire):
    text: str = Field(min_length=1, pattern=r"\S", description="Not blank")


class NamespaceRef(_Wire):
    namespace_id: str = Field(min_length=1)


class PlacedIn(_Wire):
    """Where a memory or session is placed: the namespace, its current name and path."""

    namespace_id: str
    name: str
    path: str


class NamespaceScope(enum.StrEnum):
    SHARED = "SHARED"
    PERSONAL = "PERSONAL"


class NamespaceState(enum.StrEnum):
    ACTIVE = "ACTIVE"
    ARCHIVED = "ARCHIVED"


class Namespace(_Wire):
    namespace_id: str
    name: str
    root_id: str
    scope: NamespaceScope
    state: NamespaceState
    revision: int
    created_at: datetime
    updated_at: datetime
    path: str
    parent_id: str | None = None
    owner_id: str | None = None


class CreateNamespaceRequest(_Wire):
    name: str | None = None
    path: str | None = Field(default=None, min_length=1, max_length=2_000)
    scope: NamespaceScope | None = None
    parent_id: str | None = None
    owner_id: OwnerId | None = None


class UpdateNamespaceRequest(_Wire):
    name: str | None = None
    state: NamespaceState | None = None


class NamespaceResponse(_Wire):
    namespace: Namespace


class NamespaceList(_Wire):
    items: list[Namespace]
    next_page_token: str | None = None


# -- session memory ---------------------------------------------------------------------------


class AddSessionEventRequest(_Wire):
    actor_id: str = Field(min_length=1, max_length=255)
    role: MessageRole
    content: list[TextPart] = Field(min_length=1)
    created_at: Instant
    session_id: str | None = None
    namespace: str | None = Field(default=None, description="A label, kept with the session")
    namespace_ref: NamespaceRef | None = None
    metadata: Any = None


class SessionEvent(_Wire):
    event_id: str
    actor_id: str
    session_id: str
    role: MessageRole
    content: list[TextPart]
    created_at: datetime
    system_timestamp: datetime
    metadata: Any = None


class SessionEventResponse(_Wire):
    event: SessionEvent


class SessionSummary(_Wire):
    text: str
    summarized_up_to_event_id: str
    created_at: datetime
    updated_at: datetime
    metadata: Any = None
    summarized_events: int


class SessionMemory(_Wire):
    session_id: str
    owner_id: str
    events: list[SessionEvent]
    namespace: str | None = None
    namespace_ref: PlacedIn | None = None
    summary: SessionSummary | None = None


class SessionList(_Wire):
    items: list[str]
    total: int
    next_page_token: str | None = None


# -- long-term memory -------------------------------------------------------------------------


class CreateMemory(_Wire):
    id: str = Field(description="The client's id: the idempotency key and the handle")
    text: str = Field(min_length=1, max_length=50_000, pattern=r"\S")
    owner_id: OwnerId
    memory_type: str | None = None
    session_id: str | None = None
    namespace: str | None = None
    namespace_ref: NamespaceRef | None = None
    topics: list[Topic] | None = Field(default=None, max_length=50)
    attributes: dict[str, Any] | None = None


class BulkCreateRequest(_Wire):
    memories: list[CreateMemory] = Field(min_length=1)


class BulkError(_Wire):
    id: str
    error: str


class BulkCreateResponse(_Wire):
    created: list[str]
    errors: list[BulkError] | None = None


class BulkDeleteRequest(_Wire):
    memory_ids: list[str] = Field(min_length=1)


class BulkDeleteResponse(_Wire):
    deleted: list[str]
    errors: list[BulkError] | None = None


class MoveRequest(_Wire):
    memory_ids: list[str] = Field(min_length=1, max_length=1_000)
    namespace_ref: NamespaceRef


class MoveResponse(_Wire):
    moved: list[str]
    errors: list[BulkError] | None = None


class StoreMemory(_Wire):
    """A long-term memory as the store API answers it."""

    id: str
    text: str
    created_at: datetime
    updated_at: datetime
    memory_type: str | None = None
    session_id: str | None = None
    owner_id: str | None = None
    namespace: str | None = None
    namespace_ref: PlacedIn | None = None
    topics: list[str] | None = None
    attributes: dict[str, Any] | None = None


class UpdateMemory(_Wire):
    text: str | None = Field(default=None, min_length=1, max_length=50_000, pattern=r"\S")
    memory_type: str | None = None
    topics: list[Topic] | None = Field(default=None, max_length=50)
    namespace: str | None = None
    namespace_ref: NamespaceRef | None = None
    owner_id: OwnerId | None = None
    session_id: str | None = None


class UpdateMemoryFields(_Wire):
    memory_type: str
    namespace: str | None = None
    namespace_ref: NamespaceRef | None = None
    text: str | None = Field(default=None, min_length=1, max_length=50_000, pattern=r"\S")
    attributes: dict[str, Any] | None = None


class ValueFilter(_Wire):
    """A string field's filter: equal to, not equal to, one of, or (for lists) all of."""

    eq: str | None = None
    ne: str | None = None
    in_: list[str] | None = Field(default=None, alias="in")
    all: list[str] | None = None


class TimeFilter(_Wire):
    gt: FilterInstant | None = None
    gte: FilterInstant | None = None
    lt: FilterInstant | None = None
    lte: FilterInstant | None = None
    eq: FilterInstant | None = None


class AttributeClause(_Wire):
    """One attribute's filter: exactly one member set."""

    string: str | None = None
    number: float | None = None
    boolean: bool | None = None
    list_: list[str] | None = Field(default=None, alias="list")


class LongTermMemoryFilter(_Wire):
    session_id: ValueFilter | None = None
    owner_id: ValueFilter | None = None
    namespace: ValueFilter | None = None
    namespace_ref: ValueFilter | None = None
    unnamespaced: bool | None = None
    topics: ValueFilter | None = None
    memory_type: ValueFilter | None = None
    created_at: TimeFilter | None = None
    attributes: dict[str, AttributeClause] | None = None


class FilterConjunction(enum.StrEnum):
    ALL = "all"
    ANY = "any"


class SearchRequest(_Wire):
    text: str | None = None
    similarity_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    filter: LongTermMemoryFilter | None = None
    filter_op: FilterConjunction = Field(default=FilterConjunction.ALL)
    limit: int = Field(default=10, ge=1, le=100)
    page_token: str | None = None


class SearchResponse(_Wire):
    items: list[StoreMemory]
    next_page_token: str | None = None


# -- health -----------------------------------------------------------------------------------


class Health(_Wire):
    status: str


class FeatureHealth(_Wire):
    status: str


class StoreHealth(_Wire):
    status: str
    features: dict[str, FeatureHealth]
