"""The HTTP API: agent-memory-server's long-term routes on FastAPI, with tenant-scoped keys.

Handlers are thin: FastAPI parses the request into AMS's models (refusing unknown fields),
`ApiKeys.authenticate` says who is asking, and `MemoryService` does the work. Errors become
status codes in one place (`_STATUS`), each answered as `{"detail", "code", "retryable"}`
(`detail` is what AMS's client reads). A body over MEMSTREAM_SERVER_MAX_BODY_BYTES is refused
with 413 before it is read whole. AMS routes memstream does not serve (working memory, summary
views, tasks, edit, compact) answer 501 saying so. The MCP tools are served at `/mcp`.

`/metrics` answers the server's metrics in Prometheus's text format without a key: requests
counted and timed by route template and status, no tenant, path or query in any label. It
says nothing about anyone's memories; keep it off the public network like the rest of the
operator's scrape targets (docs/server.md).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstream import __version__
from memstream.errors import (
    ConfigurationError,
    ForbiddenError,
    InfrastructureError,
    InvalidInputError,
    LimitExceededError,
    MemoryIdRetiredError,
    MemoryNotFoundError,
    MemstreamError,
    NotAuthenticatedError,
    ProjectionLagError,
)
from memstream.metrics import Metrics, ServerMetrics
from memstream.server.keys import ApiKeys, Principal
from memstream.server.mcp import build_mcp, http_principal, key_principal
from memstream.server.models import (
    MEMORY_ID_PATTERN,
    AckResponse,
    CreateMemoryRecordRequest,
    EditMemoryRecordRequest,
    ForgetRequest,
    ForgetResponse,
    HealthCheckResponse,
    MemoryPromptRequest,
    MemoryPromptResponse,
    MemoryRecord,
    MemoryRecordResults,
    SearchRequest,
)
from memstream.server.service import MAX_DELETE_IDS, MemoryService

__all__ = ["ErrorResponse", "create_app"]

ServiceFactory = Callable[[], AbstractAsyncContextManager[MemoryService]]


class ErrorResponse(BaseModel):
    detail: str
    code: str
    retryable: bool = False


# The most specific class first: the first match decides.
_STATUS: tuple[tuple[type[MemstreamError], int], ...] = (
    (NotAuthenticatedError, 401),
    (ForbiddenError, 403),
    (MemoryNotFoundError, 404),
    (MemoryIdRetiredError, 409),
    (InvalidInputError, 422),
    (ProjectionLagError, 504),
    (InfrastructureError, 503),
    (ConfigurationError, 500),
)

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse} for status in (401, 403, 404, 409, 413, 422, 503, 504)
}


def _service(request: Request) -> MemoryService:
    service: MemoryService = request.app.state.service
    return service


async def _principal(request: Request) -> Principal:
    # One keyed Redis read (well under a millisecond): cheaper on the event loop than the
    # thread hop FastAPI makes for a synchronous dependency.
    keys: ApiKeys = request.app.state.keys
    return keys.authenticate(
        request.headers.get("authorization"), keyless=request.app.state.keyless
    )


Service = Annotated[MemoryService, Depends(_service)]
MemoryId = Annotated[str, Field(pattern=MEMORY_ID_PATTERN)]
Caller = Annotated[Principal, Depends(_principal)]
Wait = Annotated[bool, Query(description="Answer only once the memories are recallable (or 504)")]
WaitTimeout = Annotated[
    float, Query(gt=0, description="Seconds ?wait=true waits at most (server maximum)")
]
Tenant = Annotated[
    str | None,
    Query(description="The tenant, for admin keys (field: MEMSTREAM_SERVER_TENANT_FIELD)"),
]


def _status(exc: MemstreamError) -> int:
    if isinstance(exc, LimitExceededError) and exc.limit == "max_body_bytes":
        return 413
    return next((status for cls, status in _STATUS if isinstance(exc, cls)), 500)


def _error(status: int, code: str, detail: str, retryable: bool = False) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    body = ErrorResponse(detail=detail, code=code, retryable=retryable)
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


class _BodyLimit:
    """Refuses a request body over `limit` bytes with 413: at once by its Content-Length, or,
    for a body streamed without one, as soon as more than `limit` bytes have arrived. The
    body is read here (at most `limit` bytes held) and handed on whole."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self._app = app
        self._limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._limit:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                chunks = []
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self._limit:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self._app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = _error(
            413,
            LimitExceededError.code,
            f"the request body is larger than {self._limit} bytes "
            "(MEMSTREAM_SERVER_MAX_BODY_BYTES); send fewer or shorter memories per request",
        )
        await response(scope, receive, send)


class _Measured:
    """Counts and times every HTTP request by its route's template
    (`/v1/long-term-memory/{memory_id}`), never its path or query, which hold memory ids and
    tenants; a request no route matched counts as `unmatched`."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self._app(scope, receive, sending)
        finally:
            # The router writes the matched route into the scope it was handed (this one).
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            elapsed = time.perf_counter() - started
            self._metrics.observe(scope["method"], route, status, elapsed)


class _McpGate:
    """Refuses a request to `/mcp` without a tenant key (401, or 403 for an admin key) before
    the MCP transport opens anything; the tools then read the same key for their tenant."""

    def __init__(self, app: ASGIApp, keys: ApiKeys, keyless: bool) -> None:
        self._app = app
        self._keys = keys
        self._keyless = keyless

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/") == "/mcp":
            raw = dict(scope["headers"]).get(b"authorization")
            try:
                key_principal(
                    self._keys, raw.decode("latin-1") if raw else None, keyless=self._keyless
                )
            except MemstreamError as exc:
                response = _error(_status(exc), exc.code, str(exc), exc.retryable)
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


def create_app(
    service: ServiceFactory,
    keys: ApiKeys,
    *,
    max_body_bytes: int,
    keyless: bool,
    host: str = "127.0.0.1",
    metrics: Metrics | None = None,
) -> FastAPI:
    """The ASGI app. `service` opens the memory service for the app's lifetime. `keyless`:
    whether requests without a key act as admin while no key exists (only on loopback, or
    when told --insecure). `host` is where it listens (the MCP transport checks Host).
    `metrics` is the registry `/metrics` serves (a new one if not given)."""
    metrics = metrics or Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with service() as opened, mcp.session_manager.run():
            app.state.service = opened
            yield

    app = FastAPI(
        title="memstream",
        version=__version__,
        summary="Event-sourced long-term memory, wire-compatible with agent-memory-server's "
        "long-term API",
        lifespan=lifespan,
        responses=_ERRORS,
    )
    app.add_middleware(_BodyLimit, limit=max_body_bytes)
    app.add_middleware(_McpGate, keys=keys, keyless=keyless)
    # Outermost: a request refused by the gates above is counted too.
    app.add_middleware(_Measured, metrics=metrics.server)
    app.state.keys = keys
    app.state.keyless = keyless
    mcp = build_mcp(lambda: app.state.service, http_principal(keys, keyless=keyless))
    mcp_app = mcp.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, host=host
    )

    @app.exception_handler(MemstreamError)
    async def memstream_error(request: Request, exc: MemstreamError) -> JSONResponse:
        return _error(_status(exc), exc.code, str(exc), exc.retryable)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI could not read the body as JSON
            return _error(
                422, InvalidInputError.code, "the request body is not JSON (UTF-8): send JSON"
            )
        return _error(exc.status_code, "http", str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()[:10]
        )
        return _error(422, InvalidInputError.code, f"the request is not valid: {problems}")

    @app.get("/metrics", include_in_schema=False)
    def prometheus_metrics() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/health", response_model=HealthCheckResponse)
    def health() -> HealthCheckResponse:
        return HealthCheckResponse(now=int(time.time() * 1000))

    @app.post("/v1/long-term-memory/", response_model=AckResponse)
    async def create_long_term_memory(
        body: CreateMemoryRecordRequest,
        service: Service,
        caller: Caller,
        wait: Wait = False,
        wait_timeout: WaitTimeout = 10.0,
    ) -> AckResponse:
        """One MemorySaved event per record, answered once Kafka has acknowledged them."""
        return await service.create(caller, body.memories, wait=wait_timeout if wait else None)

    @app.post("/v1/long-term-memory/search", response_model=MemoryRecordResults)
    def search_long_term_memory(
        body: SearchRequest,
        service: Service,
        caller: Caller,
        optimize_query: Annotated[bool, Query(description="Ignored")] = False,
    ) -> MemoryRecordResults:
        return service.search(caller, body)

    @app.get("/v1/long-term-memory/{memory_id}", response_model=MemoryRecord)
    def get_long_term_memory(
        memory_id: Annotated[str, Path(pattern=MEMORY_ID_PATTERN)],
        service: Service,
        caller: Caller,
        namespace: Tenant = None,
        user_id: Tenant = None,
    ) -> MemoryRecord:
        named = namespace if service.scoping.tenant_field == "namespace" else user_id
        return service.get(caller, memory_id, named=named)

    @app.patch("/v1/long-term-memory/{memory_id}", response_model=MemoryRecord)
    async def update_long_term_memory(
        memory_id: Annotated[str, Path(pattern=MEMORY_ID_PATTERN)],
        body: EditMemoryRecordRequest,
        service: Service,
        caller: Caller,
        namespace: Tenant = None,
        user_id: Tenant = None,
        wait: Wait = False,
        wait_timeout: WaitTimeout = 10.0,
    ) -> MemoryRecord:
        """Change some fields of a memory: the whole new memory is saved under its id."""
        named = namespace if service.scoping.tenant_field == "namespace" else user_id
        return await service.edit(
            caller, memory_id, body, named=named, wait=wait_timeout if wait else None
        )

    @app.delete("/v1/long-term-memory", response_model=AckResponse)
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
        named = namespace if service.scoping.tenant_field == "namespace" else user_id
        return await service.delete(
            caller, memory_ids, named=named, wait=wait_timeout if wait else None
        )

    @app.post("/v1/long-term-memory/forget", response_model=ForgetResponse)
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

    @app.post("/v1/memory/prompt", response_model=MemoryPromptResponse)
    def memory_prompt(
        body: MemoryPromptRequest,
        service: Service,
        caller: Caller,
        optimize_query: Annotated[bool, Query(description="Ignored")] = False,
    ) -> MemoryPromptResponse:
        return service.prompt(caller, body)

    app.router.routes.extend(mcp_app.routes)
    for method, path in _NOT_SERVED:
        app.add_api_route(
            path,
            _not_served(path),
            methods=[method],
            status_code=501,
            responses={501: {"model": ErrorResponse}},
            include_in_schema=False,
        )
    return app


_NOT_SERVED = (
    ("GET", "/v1/working-memory/"),
    ("GET", "/v1/working-memory/{session_id}"),
    ("PUT", "/v1/working-memory/{session_id}"),
    ("DELETE", "/v1/working-memory/{session_id}"),
    ("POST", "/v1/long-term-memory/compact"),
    ("GET", "/v1/summary-views"),
    ("POST", "/v1/summary-views"),
    ("GET", "/v1/summary-views/{view_id}"),
    ("DELETE", "/v1/summary-views/{view_id}"),
    ("POST", "/v1/summary-views/{view_id}/partitions/run"),
    ("GET", "/v1/summary-views/{view_id}/partitions"),
    ("POST", "/v1/summary-views/{view_id}/run"),
    ("GET", "/v1/tasks/{task_id}"),
)


def _not_served(path: str) -> Callable[[], Awaitable[JSONResponse]]:
    async def not_served() -> JSONResponse:
        return _error(
            501,
            "not_served",
            f"{path} is an agent-memory-server route memstream does not serve: memstream keeps "
            "long-term memory only (create, search, get, delete, forget, prompt). Keep working "
            "memory in your agent, and record finished turns as long-term memories.",
        )

    return not_served
