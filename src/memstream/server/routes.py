"""The HTTP routes: agent-memory-server's long-term routes, health and metrics, as
`APIRouter`s of module-level handlers (working memory's are in server/working_memory.py,
summary views' in server/summary_routes.py).

Handlers are thin: FastAPI parses the request into AMS's models (refusing unknown fields),
and each handler receives what it depends on through `Depends`: the `MemoryService` the app
opened (`service`), the caller's `Principal` (`caller`: `ApiKeys.authenticate` on the
request's key) and the metrics registry. `create_app` (server/app.py) puts those on the app's
state and includes the routers.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field

from memstream.metrics import Metrics
from memstream.server.api_keys import ApiKeys, Principal
from memstream.server.models import (
    MEMORY_ID_PATTERN,
    AckResponse,
    CreateMemoryRecordRequest,
    EditMemoryRecordRequest,
    ForgetRequest,
    ForgetResponse,
    HealthCheckResponse,
    MemoryHistory,
    MemoryPromptRequest,
    MemoryPromptResponse,
    MemoryRecord,
    MemoryRecordResults,
    SearchRequest,
    StoredMemoryRecord,
)
from memstream.server.service import MAX_DELETE_IDS, MemoryService

__all__ = ["Caller", "PathId", "Service", "Tenant", "memories", "operations", "validated_json"]


# The dependencies are coroutines, though they do no I/O (or one keyed Redis read): FastAPI runs a
# plain function in its thread pool, and that hop cost more than the work (bench serve).
async def service(request: Request) -> MemoryService:
    """The memory service the app opened for its lifetime."""
    opened: MemoryService = request.app.state.service
    return opened


async def caller(request: Request) -> Principal:
    """Who is asking: the principal of the request's key."""
    # At most one keyed Redis read (verified keys are cached: server/api_keys.py).
    keys: ApiKeys = request.app.state.keys
    return keys.authenticate(
        request.headers.get("authorization"), keyless=request.app.state.keyless
    )


async def metrics(request: Request) -> Metrics:
    registry: Metrics = request.app.state.metrics
    return registry


Service = Annotated[MemoryService, Depends(service)]
Caller = Annotated[Principal, Depends(caller)]
MemoryId = Annotated[str, Field(pattern=MEMORY_ID_PATTERN)]
PathId = Annotated[str, Path(pattern=MEMORY_ID_PATTERN)]
Wait = Annotated[bool, Query(description="Answer only once the memories are recallable (or 504)")]
WaitTimeout = Annotated[
    float, Query(gt=0, description="Seconds ?wait=true waits at most (server maximum)")
]
Tenant = Annotated[
    str | None,
    Query(description="The tenant, for admin keys (field: MEMSTREAM_SERVER_TENANT_FIELD)"),
]
Ignored = Annotated[bool, Query(description="Ignored")]

operations = APIRouter()
memories = APIRouter()


@operations.get("/metrics", include_in_schema=False)
def prometheus_metrics(registry: Annotated[Metrics, Depends(metrics)]) -> Response:
    return Response(registry.exposition(), media_type=CONTENT_TYPE_LATEST)


@operations.get("/v1/health", response_model=HealthCheckResponse)
def health() -> HealthCheckResponse:
    return HealthCheckResponse(now=int(time.time() * 1000))


@memories.post("/v1/long-term-memory/", response_model=AckResponse)
async def create_long_term_memory(
    body: CreateMemoryRecordRequest,
    service: Service,
    caller: Caller,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 10.0,
) -> AckResponse:
    """One MemorySaved event per record, answered once Kafka has acknowledged them."""
    return await service.create(caller, body.memories, wait=wait_timeout if wait else None)


def validated_json(model: BaseModel) -> Response:
    """`model` (built by validation already) as its JSON body, in one pass of pydantic's
    serializer. A returned model would be dumped, validated again and dumped once more by
    FastAPI, then encoded: 0.3-0.4 ms for ten search results against 0.03-0.07 ms here
    (docs/benchmarks.md, "serve"). The route's `response_model` still documents the body."""
    return Response(model.model_dump_json(by_alias=True), media_type="application/json")


@memories.post("/v1/long-term-memory/search", response_model=MemoryRecordResults)
def search_long_term_memory(
    body: SearchRequest, service: Service, caller: Caller, optimize_query: Ignored = False
) -> Response:
    return validated_json(service.search(caller, body))


@memories.get("/v1/long-term-memory/{memory_id}", response_model=StoredMemoryRecord)
async def get_long_term_memory(
    memory_id: PathId,
    service: Service,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
) -> Response:
    # One pipelined Redis read, on the event loop: a thread hop (FastAPI's for a plain
    # function) cost more than the read.
    return validated_json(
        service.get(caller, memory_id, named=service.scoping.named(namespace, user_id))
    )


@memories.get("/v1/long-term-memory/{memory_id}/history", response_model=MemoryHistory)
def long_term_memory_history(
    memory_id: PathId,
    service: Service,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
) -> MemoryHistory:
    """memstream: every event of the tenant's log that touched the memory, oldest first
    (docs/lineage.md); 404 for an id the tenant never had."""
    return service.history(caller, memory_id, named=service.scoping.named(namespace, user_id))


@memories.patch("/v1/long-term-memory/{memory_id}", response_model=MemoryRecord)
async def update_long_term_memory(
    memory_id: PathId,
    body: EditMemoryRecordRequest,
    service: Service,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 10.0,
) -> MemoryRecord:
    """Change some fields of a memory: the whole new memory is saved under its id."""
    named = service.scoping.named(namespace, user_id)
    return await service.edit(
        caller, memory_id, body, named=named, wait=wait_timeout if wait else None
    )


@memories.delete("/v1/long-term-memory", response_model=AckResponse)
async def delete_long_term_memory(
    service: Service,
    caller: Caller,
    memory_ids: Annotated[list[MemoryId], Query(min_length=1, max_length=MAX_DELETE_IDS)],
    namespace: Tenant = None,
    user_id: Tenant = None,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 10.0,
) -> AckResponse:
    """One MemoryForgotten event: the memories go, and their ids are never used again."""
    named = service.scoping.named(namespace, user_id)
    return await service.delete(
        caller, memory_ids, named=named, wait=wait_timeout if wait else None
    )


@memories.post("/v1/long-term-memory/forget", response_model=ForgetResponse)
async def forget_long_term_memories(
    body: ForgetRequest,
    service: Service,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
    session_id: Annotated[str | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100_000)] = 10_000,
    dry_run: bool = False,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 10.0,
) -> ForgetResponse:
    """Forget by policy (age, keep-newest budget; `budget: 0` forgets all), optionally one
    session's; `dry_run` only says what would go."""
    tenant_field = service.scoping.tenant_field
    named, other = (namespace, user_id) if tenant_field == "namespace" else (user_id, namespace)
    return await service.forget(
        caller,
        body,
        named=named,
        other=other,
        session_id=session_id,
        limit=limit,
        dry_run=dry_run,
        wait=wait_timeout if wait else None,
    )


@memories.post("/v1/memory/prompt", response_model=MemoryPromptResponse)
async def memory_prompt(
    body: MemoryPromptRequest, service: Service, caller: Caller, optimize_query: Ignored = False
) -> MemoryPromptResponse:
    return await service.prompt(caller, body)


@memories.post("/v1/long-term-memory/compact", response_model=AckResponse)
async def compact_long_term_memories(
    service: Service,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
    session_id: Annotated[str | None, Query(description="memstream: one session's only")] = None,
    wait: Wait = False,
    wait_timeout: WaitTimeout = 10.0,
) -> AckResponse:
    """Merge exact duplicates (same text, type, session and scope) into one memory each, as
    events (history shows each copy merged); answers how many memories remain in scope."""
    tenant_field = service.scoping.tenant_field
    named, other = (namespace, user_id) if tenant_field == "namespace" else (user_id, namespace)
    return await service.compact(
        caller,
        named=named,
        other=other,
        session_id=session_id,
        wait=wait_timeout if wait else None,
    )
