"""The HTTP API: agent-memory-server's long-term routes on FastAPI, with tenant-scoped keys.

`create_app` assembles the app: the routers of server/routes.py (whose handlers receive the
service and the caller through `Depends`), Redis Agent Memory's store routes
(server/store_routes.py), the summary views and tasks (server/summary_routes.py), the console's
pages at `/console` (server/console.py), the MCP tools at `/mcp` (server/mcp.py), the
gates in front of them, and the error handlers. Errors become status codes in one place
(server/errors.py), each answered as `{"detail", "code", "retryable"}` (`detail` is what AMS's
client reads). A body over MEMSTREAM_SERVER_MAX_BODY_BYTES is refused with 413 before it is
read whole.

`/metrics` answers the server's metrics in Prometheus's text format without a key: requests
counted and timed by route template and status, no tenant, path or query in any label. It
says nothing about anyone's memories; keep it off the public network like the rest of the
operator's scrape targets (docs/server.md).
"""

from __future__ import annotations

import gc
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstream import __version__
from memstream.errors import InvalidInputError, LimitExceededError, MemstreamError
from memstream.metrics import Metrics, ServerMetrics
from memstream.server import routes
from memstream.server.api_keys import ApiKeys
from memstream.server.console import console
from memstream.server.console_sessions import ConsoleSessions
from memstream.server.errors import ERROR_RESPONSES, error_response, status_of
from memstream.server.mcp import build_mcp, http_principal, key_principal
from memstream.server.service import MemoryService
from memstream.server.store_routes import stores
from memstream.server.stores import StoreService
from memstream.server.summary_routes import summary_views
from memstream.server.summary_views import SummaryViews
from memstream.server.working_memory import working_memory

if TYPE_CHECKING:  # the deployment's operations: imported by who builds them (serve)
    from memstream.server.console_ops import ConsoleOperations

__all__ = ["create_app"]

ServiceFactory = Callable[[], AbstractAsyncContextManager[MemoryService]]


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
        response = error_response(
            413,
            LimitExceededError.code,
            f"the request body is larger than {self._limit} bytes "
            "(MEMSTREAM_SERVER_MAX_BODY_BYTES); send fewer or shorter memories per request",
            path=scope["path"],
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


# `/mcp`, or AMS's `/{namespace}/mcp` (a trailing slash allowed).
_MCP_PATH = re.compile(r"^(?:/(?P<namespace>[^/]+))?/mcp/?$")


class _McpGate:
    """Refuses a request to `/mcp` without a tenant key (401, or 403 for an admin key) before
    the MCP transport opens anything; the tools then read the same key for their tenant.
    AMS also serves MCP at `/{namespace}/mcp`: there the namespace must be the key's tenant
    (403 otherwise), and the request goes on to `/mcp`."""

    def __init__(self, app: ASGIApp, keys: ApiKeys, keyless: bool) -> None:
        self._app = app
        self._keys = keys
        self._keyless = keyless

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        named = _MCP_PATH.match(scope["path"]) if scope["type"] == "http" else None
        if named is not None:
            raw = dict(scope["headers"]).get(b"authorization")
            try:
                principal = key_principal(
                    self._keys, raw.decode("latin-1") if raw else None, keyless=self._keyless
                )
                if named["namespace"] is not None:
                    # The ASGI path is decoded already: the segment is the tenant as named.
                    principal.tenant_for([named["namespace"]], "the MCP path")
                    scope = {**scope, "path": "/mcp", "raw_path": b"/mcp"}
            except MemstreamError as exc:
                response = error_response(status_of(exc), exc.code, str(exc), exc.retryable)
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


async def _memstream_error(request: Request, exc: MemstreamError) -> JSONResponse:
    path = request.url.path
    return error_response(status_of(exc, path), exc.code, str(exc), exc.retryable, path=path)


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    path = request.url.path
    if exc.status_code == 400:  # FastAPI could not read the body as JSON
        return error_response(
            status_of(InvalidInputError(), path),
            InvalidInputError.code,
            "the request body is not JSON (UTF-8): send JSON",
            path=path,
        )
    return error_response(exc.status_code, "http", str(exc.detail), path=path)


async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
        for error in exc.errors()[:10]
    )
    path = request.url.path
    return error_response(
        status_of(InvalidInputError(), path),
        InvalidInputError.code,
        f"the request is not valid: {problems}",
        path=path,
    )


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The memory service and the MCP sessions, open while the app runs."""
    async with app.state.open_service() as opened, app.state.mcp.session_manager.run():
        app.state.service = opened
        app.state.stores = StoreService(opened)
        app.state.summary_views = SummaryViews(opened)
        # What start-up built (modules, schemas, the embedder, clients) lives as long as the
        # process: out of the collector's sight, a full collection no longer walks it all and
        # stalls every request in flight (~0.2 s each on the bench machine, bench serve).
        gc.collect()
        gc.freeze()
        yield


def create_app(
    service: ServiceFactory,
    keys: ApiKeys,
    *,
    max_body_bytes: int,
    keyless: bool,
    host: str = "127.0.0.1",
    metrics: Metrics | None = None,
    operations: ConsoleOperations | None = None,
) -> FastAPI:
    """The ASGI app. `service` opens the memory service for the app's lifetime. `keyless`:
    whether requests without a key act as admin while no key exists (only on loopback, or
    when told --insecure). `host` is where it listens (the MCP transport checks Host).
    `metrics` is the registry `/metrics` serves (a new one if not given). `operations`: what
    the console's operations page reads and does (None: that page says it is not here)."""
    app = FastAPI(
        title="memstream",
        version=__version__,
        summary="Event-sourced long-term memory, wire-compatible with agent-memory-server's "
        "long-term and working-memory API",
        lifespan=_lifespan,
        responses=ERROR_RESPONSES,
    )
    app.add_middleware(_BodyLimit, limit=max_body_bytes)
    app.add_middleware(_McpGate, keys=keys, keyless=keyless)
    # Outermost: a request refused by the gates above is counted too.
    metrics = metrics or Metrics()
    app.add_middleware(_Measured, metrics=metrics.server)
    # What the lifespan opens, and what the routes' dependencies read (server/routes.py).
    app.state.open_service = service
    app.state.keys = keys
    app.state.keyless = keyless
    app.state.metrics = metrics
    app.state.console_sessions = ConsoleSessions()
    app.state.operations = operations
    app.exception_handler(MemstreamError)(_memstream_error)
    app.exception_handler(StarletteHTTPException)(_http_error)
    app.exception_handler(RequestValidationError)(_invalid_request)
    # Working memory first: its puts come every turn, and routes are matched in order.
    app.include_router(working_memory)
    app.include_router(routes.operations)
    app.include_router(routes.memories)
    app.include_router(stores)
    app.include_router(summary_views)
    app.include_router(console)
    mcp = build_mcp(lambda: app.state.service, http_principal(keys, keyless=keyless))
    app.state.mcp = mcp
    mcp_app = mcp.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, host=host
    )
    app.router.routes.extend(mcp_app.routes)
    return app
