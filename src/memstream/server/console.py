"""The console at `/console`: what a tenant's agent remembers, seen and changed in a browser.

Server-rendered pages (Jinja2, every value escaped; no script at all) over the same service the
API routes use, so what a page shows is what the API answers: the explorer searches with the
one ranking (`MemoryService.find`), a memory's page shows its provenance and its history in the
log (`MemoryService.history`), and forgetting writes the same `MemoryForgotten` event the API's
delete does, after a page that says so.

Who a browser is comes from `console_sessions`: a tenant key's session sees that tenant only
(whatever a URL names), an admin key's names the tenant it looks at. Every page is sent with a
Content-Security-Policy that allows no script and no other origin, is never cached, and never
names a key.
"""

from __future__ import annotations

from datetime import datetime
from importlib.resources import files
from typing import Annotated, Any

import anyio
import jinja2
from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from memstream.errors import (
    InvalidInputError,
    MemoryNotFoundError,
    MemstreamError,
    NotAuthenticatedError,
)
from memstream.memory.events.recorded import check_memory_id
from memstream.memory.model import Memory, MemoryType
from memstream.memory.search import SearchFilter, SearchMode
from memstream.memory.tenancy import TenantId, validate_tenant
from memstream.server.api_keys import ApiKeys
from memstream.server.console_sessions import COOKIE, ConsoleSession, ConsoleSessions, check_form
from memstream.server.errors import status_of
from memstream.server.models import MEMORY_ID_PATTERN
from memstream.server.service import MemoryService
from memstream.streams.lineage import KEEP_S

__all__ = ["SECURITY_HEADERS", "console"]

console = APIRouter(prefix="/console", include_in_schema=False)

# No script, no frame, no other origin: a memory's text that slipped past escaping could not
# run, load or send anything.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_PAGE = 50

_templates = jinja2.Environment(
    loader=jinja2.FunctionLoader(
        lambda name: (
            files("memstream.server")
            .joinpath("console_templates", name)
            .read_text(encoding="utf-8")
        )
    ),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
_CSS = files("memstream.server").joinpath("console_static", "console.css").read_bytes()


def _sessions(request: Request) -> ConsoleSessions:
    sessions: ConsoleSessions = request.app.state.console_sessions
    return sessions


def _page(
    template: str, status: int = 200, session: ConsoleSession | None = None, **values: Any
) -> HTMLResponse:
    html = _templates.get_template(template).render(session=session, **values)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def _failed(exc: MemstreamError, session: ConsoleSession | None) -> Response:
    if isinstance(exc, NotAuthenticatedError) and session is None:
        return RedirectResponse("/console/sign-in", 303, headers=SECURITY_HEADERS)
    return _page("error.html", status_of(exc), session, message=str(exc), code=exc.code)


def _signed_in(request: Request) -> ConsoleSession:
    return _sessions(request).get(request.cookies.get(COOKIE))


def _service(request: Request) -> MemoryService:
    service: MemoryService = request.app.state.service
    return service


def _tenant(session: ConsoleSession, named: str | None) -> TenantId:
    """The tenant a page looks at: a tenant key's own, whatever is named; an admin's, named."""
    if session.principal.tenant is not None:
        return validate_tenant(session.principal.tenant)
    if not named:
        raise InvalidInputError("an admin key looks at one tenant at a time: name it")
    return session.principal.tenant_for([named], "tenant")


@console.get("/static/console.css")
async def stylesheet() -> Response:
    return Response(_CSS, media_type="text/css", headers={"Cache-Control": "max-age=3600"})


@console.get("/sign-in")
async def sign_in_page(request: Request) -> Response:
    keys: ApiKeys = request.app.state.keys
    keyless = bool(request.app.state.keyless) and not keys.any()
    return _page("sign_in.html", keyless=keyless, message=None)


@console.post("/sign-in")
async def sign_in(request: Request, key: Annotated[str, Form(max_length=512)] = "") -> Response:
    keys: ApiKeys = request.app.state.keys
    keyless = bool(request.app.state.keyless) and not keys.any()
    try:
        header = f"Bearer {key.strip()}" if key.strip() else None
        principal = keys.authenticate(header, keyless=request.app.state.keyless)
    except MemstreamError as exc:
        return _page("sign_in.html", 401, keyless=keyless, message=str(exc))
    token = _sessions(request).start(principal)
    response = RedirectResponse("/console", 303, headers=SECURITY_HEADERS)
    response.set_cookie(
        COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/console",
    )
    return response


@console.post("/sign-out")
async def sign_out(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
    try:
        session = _signed_in(request)
        check_form(session, csrf)
    except MemstreamError as exc:
        return _failed(exc, None)
    _sessions(request).end(request.cookies.get(COOKIE))
    response = RedirectResponse("/console/sign-in", 303, headers=SECURITY_HEADERS)
    response.delete_cookie(COOKIE, path="/console")
    return response


@console.get("")
async def explorer(
    request: Request,
    q: Annotated[str, Query(max_length=2000)] = "",
    tenant: Annotated[str | None, Query(max_length=256)] = None,
    thread: Annotated[str, Query(max_length=256)] = "",
    kind: Annotated[str, Query(max_length=32)] = "",
    forgotten: Annotated[str | None, Query(pattern=MEMORY_ID_PATTERN)] = None,
) -> Response:
    session = None
    try:
        session = _signed_in(request)
        if session.principal.tenant is None and not tenant:
            return _page("explorer.html", session=session, tenant=None, hits=None, q=q,
                         thread=thread, kind=kind, kinds=_KINDS, forgotten=None)  # fmt: skip
        named = _tenant(session, tenant)
        kinds = (MemoryType(kind),) if kind else ()
        where = SearchFilter(named, threads=(thread,) if thread else (), memory_types=kinds)
        service = _service(request)
        page = await anyio.to_thread.run_sync(
            lambda: service.find(where, q, mode=SearchMode.HYBRID, limit=_PAGE, offset=0)
        )
    except ValueError as exc:  # an unknown memory type
        return _failed(InvalidInputError(f"no such memory type: {exc}"), session)
    except MemstreamError as exc:
        return _failed(exc, session)
    return _page(
        "explorer.html", session=session, tenant=named, hits=page.hits, total=page.total, q=q,
        thread=thread, kind=kind, kinds=_KINDS, forgotten=forgotten,
    )  # fmt: skip


_KINDS = [t.value for t in MemoryType]


@console.get("/memories/{memory_id}")
async def memory_page(
    request: Request,
    memory_id: str,
    tenant: Annotated[str | None, Query(max_length=256)] = None,
    at: Annotated[datetime | None, Query()] = None,
) -> Response:
    """A memory now, its provenance and history; with `at`, also as it stood then (a history
    entry links there), though it may be gone now."""
    session = None
    try:
        session = _signed_in(request)
        named = _tenant(session, tenant)
        check_memory_id(memory_id)
        (memory,) = await _service(request).lookup(named, [memory_id])
        then = None if at is None else await _then(request, named, memory_id, at)
        if memory is None and then is None:
            raise MemoryNotFoundError(f"no memory with id {memory_id!r} in this tenant")
        history, unavailable = await _history(request, session, named, memory_id)
    except MemstreamError as exc:
        return _failed(exc, session)
    return _page(
        "memory.html", session=session, tenant=named, memory_id=memory_id, memory=memory,
        at=at, then=then, history=history, unavailable=unavailable, keep_s=KEEP_S,
    )  # fmt: skip


@console.get("/time")
async def time_page(
    request: Request,
    tenant: Annotated[str | None, Query(max_length=256)] = None,
    at: Annotated[datetime | None, Query()] = None,
    since: Annotated[datetime | None, Query()] = None,
) -> Response:
    """The tenant's memory as it stood at `at`; with `since`, what changed from then to `at`."""
    session = None
    try:
        session = _signed_in(request)
        named = _tenant(session, tenant) if session.principal.tenant or tenant else None
        service = _service(request)
        view = changes = None
        if named is not None and at is not None:
            moment = at
            view = await anyio.to_thread.run_sync(lambda: service.view(named, moment))
            view.sort(key=lambda m: m.timestamp, reverse=True)
            if since is not None:
                start = since
                changes = await anyio.to_thread.run_sync(
                    lambda: service.changes(named, start, moment)
                )
    except MemstreamError as exc:
        return _failed(exc, session)
    return _page(
        "time.html", session=session, tenant=named, at=at, since=since, view=view,
        changes=changes,
    )  # fmt: skip


@console.get("/memories/{memory_id}/forget")
async def forget_page(
    request: Request,
    memory_id: str,
    tenant: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    session = None
    try:
        session = _signed_in(request)
        named = _tenant(session, tenant)
        memory = await _memory(request, named, memory_id)
    except MemstreamError as exc:
        return _failed(exc, session)
    return _page("forget.html", session=session, tenant=named, memory=memory)


@console.post("/memories/{memory_id}/forget")
async def forget(
    request: Request,
    memory_id: str,
    csrf: Annotated[str, Form()] = "",
    tenant: Annotated[str | None, Form(max_length=256)] = None,
) -> Response:
    session = None
    try:
        session = _signed_in(request)
        check_form(session, csrf)
        named = _tenant(session, tenant)
        await _memory(request, named, memory_id)
        await _service(request).delete(session.principal, [memory_id], named=named, wait=10.0)
    except MemstreamError as exc:
        return _failed(exc, session)
    shown = f"/console?forgotten={memory_id}"
    if session.principal.tenant is None:
        shown += f"&tenant={named}"
    return RedirectResponse(shown, 303, headers=SECURITY_HEADERS)


async def _memory(request: Request, tenant: TenantId, memory_id: str) -> Memory:
    check_memory_id(memory_id)
    (memory,) = await _service(request).lookup(tenant, [memory_id])
    if memory is None:
        raise MemoryNotFoundError(f"no memory with id {memory_id!r} in this tenant")
    return memory


async def _then(request: Request, tenant: TenantId, memory_id: str, at: datetime) -> Memory | None:
    service = _service(request)
    view = await anyio.to_thread.run_sync(lambda: service.view(tenant, at))
    return next((m for m in view if m.id == memory_id), None)


async def _history(
    request: Request, session: ConsoleSession, tenant: str, memory_id: str
) -> tuple[list[dict[str, Any]], str | None]:
    """The memory's history in the log, oldest first, or why it cannot be read here."""
    service = _service(request)
    try:
        found = await anyio.to_thread.run_sync(
            lambda: service.history(session.principal, memory_id, named=tenant)
        )
    except InvalidInputError as exc:
        return [], str(exc)
    return [entry.model_dump() for entry in found.history], None


def _when(at: datetime | None) -> str:
    return "" if at is None else at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(at: datetime | None) -> str:
    """A time as a link's query value: exact, in UTC (a history entry's own moment)."""
    return "" if at is None else at.isoformat()


_templates.filters["when"] = _when
_templates.filters["iso"] = _iso
