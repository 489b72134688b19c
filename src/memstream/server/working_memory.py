"""The HTTP routes of working memory: agent-memory-server's `/v1/working-memory/` routes (list,
get, put, delete) and memstream's atomic append, as one `APIRouter` whose handlers call the
session service (server/sessions.py) with the service and the caller they receive by
`Depends`, as the long-term routes do (server/routes.py).

Query parameters are AMS's: `namespace` and `user_id` (one names the tenant, the other is
kept with the session), `model_name` and `context_window_max` (the context window),
`recent_messages_limit`, and `limit`/`offset` for the list.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from memstream.server.models import AckResponse
from memstream.server.routes import Caller, Service, Tenant
from memstream.server.session_models import (
    SESSION_ID_PATTERN,
    AppendMessagesRequest,
    SessionListResponse,
    UpdateWorkingMemory,
    WorkingMemoryResponse,
)
from memstream.server.sessions import Window

__all__ = ["working_memory"]

SessionId = Annotated[str, Path(pattern=SESSION_ID_PATTERN)]
ModelName = Annotated[
    str | None,
    Query(max_length=100, description="The client's model: its context window (AMS's table)"),
]
WindowMax = Annotated[
    int | None,
    Query(ge=1, le=10_000_000, description="The context window in tokens (over model_name)"),
]

working_memory = APIRouter()


def _scoped(
    service: Service, namespace: str | None, user_id: str | None
) -> tuple[str | None, str | None]:
    """The tenant a request names and the other scoping value, by the server's tenant field."""
    if service.scoping.tenant_field == "namespace":
        return namespace, user_id
    return user_id, namespace


@working_memory.get("/v1/working-memory/", response_model=SessionListResponse)
async def list_sessions(
    service: Service,
    caller: Caller,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
    namespace: Tenant = None,
    user_id: Tenant = None,
) -> SessionListResponse:
    """The tenant's live sessions (of `user_id`/`namespace`, the non-tenant field, if given),
    by id, a page at a time."""
    named, other = _scoped(service, namespace, user_id)
    return await service.sessions.sessions(
        caller, named=named, other=other, offset=offset, limit=limit
    )


@working_memory.get("/v1/working-memory/{session_id}", response_model=WorkingMemoryResponse)
async def get_working_memory(
    session_id: SessionId,
    service: Service,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
    model_name: ModelName = None,
    context_window_max: WindowMax = None,
    recent_messages_limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
) -> WorkingMemoryResponse:
    """A session's working memory (404 if none); with a window, the oldest messages that
    do not fit are left out of the answer."""
    named, other = _scoped(service, namespace, user_id)
    return await service.sessions.get(
        caller,
        session_id,
        named=named,
        other=other,
        window=Window(model_name, context_window_max),
        recent_messages_limit=recent_messages_limit,
    )


@working_memory.put("/v1/working-memory/{session_id}", response_model=WorkingMemoryResponse)
async def put_working_memory(
    session_id: SessionId,
    body: UpdateWorkingMemory,
    service: Service,
    caller: Caller,
    user_id: Tenant = None,
    model_name: ModelName = None,
    context_window_max: WindowMax = None,
) -> WorkingMemoryResponse:
    """Replace a session's working memory (with `version`: only if still current, else 409;
    without: messages appended meanwhile are kept). New exchanges are recorded as turns and
    `memories` as long-term memories before it answers; messages past the window move into
    `context`."""
    named = user_id if service.scoping.tenant_field == "user_id" else None
    if named is None and user_id is not None and body.user_id is None:
        body = body.model_copy(update={"user_id": user_id})
    return await service.sessions.put(
        caller, session_id, body, named=named, window=Window(model_name, context_window_max)
    )


@working_memory.post(
    "/v1/working-memory/{session_id}/messages", response_model=WorkingMemoryResponse
)
async def append_messages(
    session_id: SessionId,
    body: AppendMessagesRequest,
    service: Service,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
    model_name: ModelName = None,
    context_window_max: WindowMax = None,
) -> WorkingMemoryResponse:
    """memstream: add messages at the end of a session (creating it), atomically; messages
    whose ids it holds are not added again."""
    named, other = _scoped(service, namespace, user_id)
    return await service.sessions.append(
        caller,
        session_id,
        body.messages,
        named=named,
        other=other,
        window=Window(model_name, context_window_max),
    )


@working_memory.delete("/v1/working-memory/{session_id}", response_model=AckResponse)
async def delete_working_memory(
    session_id: SessionId,
    service: Service,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
) -> AckResponse:
    """Remove a session's working memory; what it recorded stays in long-term memory."""
    named, other = _scoped(service, namespace, user_id)
    return await service.sessions.delete(caller, session_id, named=named, other=other)
