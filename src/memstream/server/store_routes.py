"""The HTTP routes of Redis Agent Memory's store API (`/v1/stores/{storeId}/...` and `/health`),
as one `APIRouter` of thin handlers over `StoreService` (server/stores.py).

A store is a tenant: the caller's key decides which stores it may use (`StoreService.tenant`).
Errors on these routes are problem details (server/errors.py); namespaces are
server/namespaces.py's.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from memstream.memory.tenancy import MAX_TENANT_CHARS
from memstream.server.errors import STORE_ERROR_RESPONSES
from memstream.server.models import MEMORY_ID_PATTERN
from memstream.server.routes import Caller, validated_json
from memstream.server.session_models import SESSION_ID_PATTERN
from memstream.server.store_models import (
    AddSessionEventRequest,
    BulkCreateRequest,
    BulkCreateResponse,
    BulkDeleteRequest,
    BulkDeleteResponse,
    CreateNamespaceRequest,
    Health,
    MoveRequest,
    MoveResponse,
    NamespaceList,
    NamespaceResponse,
    NamespaceScope,
    SearchRequest,
    SearchResponse,
    SessionEventResponse,
    SessionList,
    SessionMemory,
    StoreHealth,
    StoreMemory,
    UpdateMemory,
    UpdateMemoryFields,
    UpdateNamespaceRequest,
)
from memstream.server.stores import StoreService

__all__ = ["stores"]


async def _stores(request: Request) -> StoreService:
    opened: StoreService = request.app.state.stores
    return opened


Stores = Annotated[StoreService, Depends(_stores)]
StoreId = Annotated[
    str,
    Path(
        alias="storeId",
        min_length=1,
        max_length=MAX_TENANT_CHARS,
        description="The store: a tenant id",
    ),
]
SessionId = Annotated[str, Path(alias="sessionId", pattern=SESSION_ID_PATTERN)]
EventId = Annotated[str, Path(alias="eventId", pattern=SESSION_ID_PATTERN)]
MemoryId = Annotated[str, Path(alias="memoryId", pattern=MEMORY_ID_PATTERN)]
NamespaceId = Annotated[str, Path(alias="namespaceId", pattern=MEMORY_ID_PATTERN)]

stores = APIRouter(tags=["Redis Agent Memory: stores"], responses=STORE_ERROR_RESPONSES)
_STORE = "/v1/stores/{storeId}"


@stores.get("/health", response_model=Health)
async def health() -> Health:
    return Health(status="healthy")


@stores.get(f"{_STORE}/health", response_model=StoreHealth)
async def store_health(service: Stores, principal: Caller, store_id: StoreId) -> StoreHealth:
    return await service.health(principal, store_id)


# -- session memory ---------------------------------------------------------------------------


@stores.get(f"{_STORE}/session-memory", response_model=SessionList)
async def list_sessions(
    service: Stores,
    principal: Caller,
    store_id: StoreId,
    limit: Annotated[int, Query()] = 100,
    page_token: Annotated[str | None, Query(alias="pageToken")] = None,
    owner: Annotated[str | None, Query(alias="filterOwnerId")] = None,
    include_all: Annotated[bool | None, Query(alias="includeAll")] = None,
) -> SessionList:
    return await service.sessions(
        principal,
        store_id,
        limit=limit,
        page_token=page_token,
        owner=owner,
        include_all=include_all,
    )


@stores.post(f"{_STORE}/session-memory/events", status_code=201)
async def add_session_event(
    service: Stores, principal: Caller, store_id: StoreId, body: AddSessionEventRequest
) -> SessionEventResponse:
    """Append one event to a session (created if new; a session id is made if none is
    given); each user/assistant exchange is recorded through the log as a turn."""
    return SessionEventResponse(event=await service.add_event(principal, store_id, body))


@stores.get(f"{_STORE}/session-memory/{{sessionId}}", response_model=SessionMemory)
async def get_session_memory(
    service: Stores,
    principal: Caller,
    store_id: StoreId,
    session_id: SessionId,
    include_summarised_events: Annotated[
        bool | None, Query(alias="includeSummarisedEvents")
    ] = None,
) -> SessionMemory:
    return await service.session(principal, store_id, session_id)


@stores.delete(f"{_STORE}/session-memory/{{sessionId}}", status_code=204)
async def delete_session_memory(
    service: Stores, principal: Caller, store_id: StoreId, session_id: SessionId
) -> Response:
    """The session's events go; what they recorded stays in long-term memory."""
    await service.delete_session(principal, store_id, session_id)
    return Response(status_code=204)


@stores.get(
    f"{_STORE}/session-memory/{{sessionId}}/events/{{eventId}}",
    response_model=SessionEventResponse,
)
async def get_session_event(
    service: Stores,
    principal: Caller,
    store_id: StoreId,
    session_id: SessionId,
    event_id: EventId,
) -> SessionEventResponse:
    event = await service.session_event(principal, store_id, session_id, event_id)
    return SessionEventResponse(event=event)


@stores.delete(f"{_STORE}/session-memory/{{sessionId}}/events/{{eventId}}", status_code=204)
async def delete_session_event(
    service: Stores,
    principal: Caller,
    store_id: StoreId,
    session_id: SessionId,
    event_id: EventId,
) -> Response:
    await service.delete_event(principal, store_id, session_id, event_id)
    return Response(status_code=204)


# -- long-term memory -------------------------------------------------------------------------


@stores.post(f"{_STORE}/long-term-memory", status_code=201, response_model=BulkCreateResponse)
async def create_memories(
    service: Stores, principal: Caller, store_id: StoreId, body: BulkCreateRequest
) -> BulkCreateResponse:
    return await service.create(principal, store_id, body)


@stores.delete(f"{_STORE}/long-term-memory", response_model=BulkDeleteResponse)
async def delete_memories(
    service: Stores, principal: Caller, store_id: StoreId, body: BulkDeleteRequest
) -> BulkDeleteResponse:
    return await service.delete(principal, store_id, body)


@stores.post(f"{_STORE}/long-term-memory/search", response_model=SearchResponse)
async def search_memories(
    service: Stores, principal: Caller, store_id: StoreId, body: SearchRequest
) -> Response:
    return validated_json(await service.search(principal, store_id, body))


@stores.post(f"{_STORE}/long-term-memory/move", response_model=MoveResponse)
async def move_memories(
    service: Stores, principal: Caller, store_id: StoreId, body: MoveRequest
) -> MoveResponse:
    """Place memories in an active namespace (each saved again): 404 for a namespace the
    store does not have, 409 for an archived one."""
    return await service.move(principal, store_id, body)


@stores.get(f"{_STORE}/long-term-memory/{{memoryId}}", response_model=StoreMemory)
async def get_memory(
    service: Stores, principal: Caller, store_id: StoreId, memory_id: MemoryId
) -> Response:
    return validated_json(await service.get(principal, store_id, memory_id))


@stores.patch(f"{_STORE}/long-term-memory/{{memoryId}}", response_model=StoreMemory)
async def update_memory(
    service: Stores,
    principal: Caller,
    store_id: StoreId,
    memory_id: MemoryId,
    body: UpdateMemory,
) -> StoreMemory:
    return await service.update(principal, store_id, memory_id, body)


@stores.patch(f"{_STORE}/long-term-memory/{{memoryId}}/fields", response_model=StoreMemory)
async def update_memory_fields(
    service: Stores,
    principal: Caller,
    store_id: StoreId,
    memory_id: MemoryId,
    body: UpdateMemoryFields,
) -> StoreMemory:
    return await service.update_fields(principal, store_id, memory_id, body)


# -- namespaces --------------------------------------------------------------------------------


@stores.get(f"{_STORE}/namespaces", response_model=NamespaceList)
async def list_namespaces(
    service: Stores,
    principal: Caller,
    store_id: StoreId,
    parent_id: Annotated[str | None, Query(alias="parentId")] = None,
    scope: NamespaceScope | None = None,
    owner_id: Annotated[str | None, Query(alias="ownerId")] = None,
    limit: Annotated[int, Query()] = 100,
    page_token: Annotated[str | None, Query(alias="pageToken")] = None,
) -> NamespaceList:
    tenant = service.tenant(principal, store_id)
    return await service.namespaces.listed(
        tenant,
        parent_id=parent_id,
        scope=scope,
        owner_id=owner_id,
        limit=limit,
        page_token=page_token,
    )


@stores.post(f"{_STORE}/namespaces", status_code=201, response_model=NamespaceResponse)
async def create_namespace(
    service: Stores, principal: Caller, store_id: StoreId, body: CreateNamespaceRequest
) -> NamespaceResponse:
    """A root (name and scope), a child (name and parentId) or a whole path (missing segments
    created): one NamespaceCreated event each, answered once applied."""
    tenant = service.tenant(principal, store_id)
    return NamespaceResponse(namespace=await service.namespaces.create(tenant, body))


@stores.get(f"{_STORE}/namespaces/{{namespaceId}}", response_model=NamespaceResponse)
async def get_namespace(
    service: Stores, principal: Caller, store_id: StoreId, namespace_id: NamespaceId
) -> NamespaceResponse:
    tenant = service.tenant(principal, store_id)
    return NamespaceResponse(namespace=await service.namespaces.get(tenant, namespace_id))


@stores.patch(f"{_STORE}/namespaces/{{namespaceId}}", response_model=NamespaceResponse)
async def update_namespace(
    service: Stores,
    principal: Caller,
    store_id: StoreId,
    namespace_id: NamespaceId,
    body: UpdateNamespaceRequest,
) -> NamespaceResponse:
    """Rename and/or archive (a NamespaceUpdated event of the revision read)."""
    tenant = service.tenant(principal, store_id)
    updated = await service.namespaces.update(tenant, namespace_id, body)
    return NamespaceResponse(namespace=updated)


@stores.delete(f"{_STORE}/namespaces/{{namespaceId}}", status_code=204)
async def delete_namespace(
    service: Stores, principal: Caller, store_id: StoreId, namespace_id: NamespaceId
) -> Response:
    """Remove an empty leaf (a NamespaceRemoved event); 409 while it has children or
    memories."""
    await service.namespaces.remove(service.tenant(principal, store_id), namespace_id)
    return Response(status_code=204)
