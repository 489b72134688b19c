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

import json
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from datetime import UTC, datetime
from importlib.resources import files
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import quote

import anyio
import jinja2
from fastapi import APIRouter, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from fastapi.routing import APIRoute

from memstream.errors import (
    ConfigurationError,
    ForbiddenError,
    InvalidInputError,
    KafkaUnavailableError,
    MemoryNotFoundError,
    MemstreamError,
    NotAuthenticatedError,
)
from memstream.memory.events.recorded import check_memory_id
from memstream.memory.model import Memory, MemoryType
from memstream.memory.moments import parse_moment
from memstream.memory.ports import LAG_HISTORY, LagSeries
from memstream.memory.search import SearchFilter, SearchMode
from memstream.memory.tenancy import TenantId, validate_tenant
from memstream.server.api_keys import ApiKeys
from memstream.server.console_sessions import COOKIE, ConsoleSession, ConsoleSessions, check_form
from memstream.server.errors import status_of
from memstream.server.models import MEMORY_ID_PATTERN, EditMemoryRecordRequest
from memstream.server.service import MemoryService
from memstream.streams.lineage import KEEP_S

if TYPE_CHECKING:  # built by who serves (server/console_ops.py, over a deployment)
    from memstream.server.console_ops import ConsoleOperations

__all__ = ["SECURITY_HEADERS", "console"]


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
_STATIC = files("memstream.server").joinpath("console_static")
_CSS = _STATIC.joinpath("console.css").read_bytes()
_LIVE_JS = _STATIC.joinpath("live.js").read_bytes()


def _sessions(request: Request) -> ConsoleSessions:
    sessions: ConsoleSessions = request.app.state.console_sessions
    return sessions


def _page(
    template: str, status: int = 200, session: ConsoleSession | None = None, **values: Any
) -> HTMLResponse:
    html = _templates.get_template(template).render(session=session, **values)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def _failed(request: Request, exc: MemstreamError) -> Response:
    """The page for what a console handler refused: sign-in for a browser without a session,
    else the error, said as the API says it, with the status it answers."""
    session: ConsoleSession | None = getattr(request.state, "console_session", None)
    if isinstance(exc, NotAuthenticatedError) and session is None:
        return RedirectResponse("/console/sign-in", 303, headers=SECURITY_HEADERS)
    return _page("error.html", status_of(exc), session, message=str(exc), code=exc.code)


class _ConsoleRoute(APIRoute):
    """A console page's route: its handler raises what it refuses (a MemstreamError, or a
    malformed query or form) and this answers it with `_failed`'s page, never the API's
    JSON."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handler(request: Request) -> Response:
            try:
                return await handle(request)
            except MemstreamError as exc:
                return _failed(request, exc)
            except RequestValidationError as exc:
                return _failed(request, InvalidInputError(_malformed(exc)))

        return handler


def _malformed(exc: RequestValidationError) -> str:
    said = [
        f"{'.'.join(str(part) for part in error.get('loc', ())[1:])}: {error.get('msg', '')}"
        for error in exc.errors()
    ]
    return "this request is malformed: " + "; ".join(said)


console = APIRouter(prefix="/console", include_in_schema=False, route_class=_ConsoleRoute)


def _signed_in(request: Request) -> ConsoleSession:
    """The request's session, while the key it signed in with still exists (keyless: while
    the server still has no key); a revoked key's session ends here."""
    token = request.cookies.get(COOKIE)
    session = _sessions(request).get(token)
    keys: ApiKeys = request.app.state.keys
    current = (
        keys.holds(session.fingerprint)
        if session.fingerprint is not None
        else bool(request.app.state.keyless) and not keys.any()
    )
    if not current:
        _sessions(request).end(token)
        raise NotAuthenticatedError("the key this console session signed in with was revoked")
    request.state.console_session = session  # for the page that says what went wrong
    return session


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


@console.get("/static/live.js")
async def live_script() -> Response:
    return Response(
        _LIVE_JS, media_type="text/javascript", headers={"Cache-Control": "max-age=3600"}
    )


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
        presented = key.strip()
        header = f"Bearer {presented}" if presented else None
        principal = keys.authenticate(header, keyless=request.app.state.keyless)
    except MemstreamError as exc:
        return _page("sign_in.html", 401, keyless=keyless, message=str(exc))
    fingerprint = keys.fingerprint(presented) if presented else None
    token = _sessions(request).start(principal, fingerprint)
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
    check_form(_signed_in(request), csrf)
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
    since: Annotated[str, Query(max_length=64)] = "",
    until: Annotated[str, Query(max_length=64)] = "",
    forgotten: Annotated[str | None, Query(pattern=MEMORY_ID_PATTERN)] = None,
) -> Response:
    session = _signed_in(request)
    shown: dict[str, Any] = {
        "q": q, "thread": thread, "kind": kind, "kinds": _KINDS, "since": since, "until": until
    }  # fmt: skip
    if session.principal.tenant is None and not tenant:
        return _page("explorer.html", session=session, tenant=None, hits=None, forgotten=None,
                     **shown)  # fmt: skip
    named = _tenant(session, tenant)
    if kind and kind not in _KINDS:
        raise InvalidInputError(f"no such memory type: {kind!r} (one of {', '.join(_KINDS)})")
    kinds = (MemoryType(kind),) if kind else ()
    where = SearchFilter(
        named,
        threads=(thread,) if thread else (),
        memory_types=kinds,
        since=_moment(since, "since"),
        until=_moment(until, "until"),
    )
    service = _service(request)
    page = await anyio.to_thread.run_sync(
        lambda: service.find(where, q, mode=SearchMode.HYBRID, limit=_PAGE, offset=0)
    )
    return _page(
        "explorer.html", session=session, tenant=named, hits=page.hits, total=page.total,
        forgotten=forgotten, **shown,
    )  # fmt: skip


_KINDS = [t.value for t in MemoryType]


@console.get("/live")
async def live_page(
    request: Request, tenant: Annotated[str | None, Query(max_length=256)] = None
) -> Response:
    """New memories as the worker projects them (the page's script follows `/live/events`)."""
    session = _signed_in(request)
    named = _tenant(session, tenant) if session.principal.tenant or tenant else None
    response = _page("live.html", session=session, tenant=named)
    # This page alone runs a script: the console's own, from this origin.
    response.headers["Content-Security-Policy"] = LIVE_POLICY
    return response


@console.get("/live/events")
async def live_events(
    request: Request, tenant: Annotated[str | None, Query(max_length=256)] = None
) -> Response:
    """Server-sent events: each memory the tenant gains (`memory`: its id, text, type,
    thread, time, and the lag from its event's time to now), and the workers' lag in events
    (`lag`), polled from the projection every `LIVE_POLL_S`; it ends with the session."""
    session = _signed_in(request)
    named = _tenant(session, tenant)
    return StreamingResponse(
        _live(request, named), media_type="text/event-stream", headers=SECURITY_HEADERS
    )


LIVE_POLL_S = 0.5
LIVE_POLICY = (
    SECURITY_HEADERS["Content-Security-Policy"] + "; script-src 'self'; connect-src 'self'"
)
_LIVE_NEWEST = 20


async def _live(request: Request, tenant: TenantId) -> AsyncIterator[bytes]:
    service = _service(request)
    where = SearchFilter(tenant)
    seen: set[str] | None = None
    while not await request.is_disconnected():
        try:
            _signed_in(request)
        except MemstreamError:
            yield b"event: ended\ndata: {}\n\n"
            return
        page = await anyio.to_thread.run_sync(
            lambda: service.find(where, "", mode=SearchMode.HYBRID, limit=_LIVE_NEWEST, offset=0)
        )
        now = datetime.now(UTC)
        fresh = [hit.memory for hit in page.hits if seen is None or hit.memory.id not in seen]
        if seen is not None:  # what was there when the page opened is on it already
            for memory in reversed(fresh):
                yield _event("memory", _live_json(memory, now))
        seen = (seen or set()) | {hit.memory.id for hit in page.hits}
        operations: ConsoleOperations | None = request.app.state.operations
        if operations is not None:
            lags = [p.lag for p in await anyio.to_thread.run_sync(operations.processes)]
            known = [lag for lag in lags if lag is not None]
            yield _event("lag", {"events": max(known) if known else None})
        await anyio.sleep(LIVE_POLL_S)


def _live_json(memory: Memory, now: datetime) -> dict[str, Any]:
    made = memory.provenance.recorded_at if memory.provenance is not None else memory.timestamp
    return {
        "id": memory.id,
        "content": memory.content,
        "type": memory.memory_type.value,
        "thread": memory.thread,
        "time": _when(memory.timestamp),
        "lag_ms": max(round((now - made).total_seconds() * 1000), 0),
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


@console.get("/memories/{memory_id}")
async def memory_page(
    request: Request,
    memory_id: str,
    tenant: Annotated[str | None, Query(max_length=256)] = None,
    at: Annotated[str, Query(max_length=64)] = "",
) -> Response:
    """A memory now, its provenance and history; with `at`, also as it stood then (a history
    entry links there), though it may be gone now."""
    session = _signed_in(request)
    named = _tenant(session, tenant)
    check_memory_id(memory_id)
    moment = _moment(at, "at")
    (memory,) = await _service(request).lookup(named, [memory_id])
    then = None if moment is None else await _then(request, named, memory_id, moment)
    if memory is None and then is None:
        raise MemoryNotFoundError(f"no memory with id {memory_id!r} in this tenant")
    history, unavailable = await _history(request, session, named, memory_id)
    return _page(
        "memory.html", session=session, tenant=named, memory_id=memory_id, memory=memory,
        at=moment, then=then, history=history, unavailable=unavailable, keep_s=KEEP_S,
    )  # fmt: skip


@console.get("/time")
async def time_page(
    request: Request,
    tenant: Annotated[str | None, Query(max_length=256)] = None,
    at: Annotated[str, Query(max_length=64)] = "",
    since: Annotated[str, Query(max_length=64)] = "",
) -> Response:
    """The tenant's memory as it stood at `at`; with `since`, what changed from then to `at`."""
    session = _signed_in(request)
    named = _tenant(session, tenant) if session.principal.tenant or tenant else None
    service = _service(request)
    moment, start = _moment(at, "at"), _moment(since, "since")
    view = changes = None
    if named is not None and moment is not None:
        view = await anyio.to_thread.run_sync(lambda: service.view(named, moment))
        view.sort(key=lambda m: m.timestamp, reverse=True)
        if start is not None:
            changes = await anyio.to_thread.run_sync(lambda: service.changes(named, start, moment))
    return _page(
        "time.html", session=session, tenant=named, at=moment, since=start, view=view,
        changes=changes,
    )  # fmt: skip


@console.get("/turns")
async def turns_page(
    request: Request,
    run: Annotated[str, Query(min_length=1, max_length=256)],
    turn: Annotated[int | None, Query(ge=0)] = None,
    tenant: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    """What a run's turns (or one turn) were shown (`memstream explain`), each memory linked,
    its text only while the tenant still holds it."""
    session = _signed_in(request)
    named = _tenant(session, tenant)
    service = _service(request)
    turns = await anyio.to_thread.run_sync(lambda: service.turns(named, run, turn))
    ids = [shown.memory_id for t in turns for shown in t.shown]
    held = {m.id: m for m in await service.lookup(named, ids) if m is not None}
    return _page(
        "turns.html", session=session, tenant=named, run=run, turn=turn, turns=turns, held=held
    )


@console.post("/memories/{memory_id}/edit")
async def edit(
    request: Request,
    memory_id: str,
    csrf: Annotated[str, Form()] = "",
    text: Annotated[str, Form()] = "",
    tenant: Annotated[str | None, Form(max_length=256)] = None,
) -> Response:
    """The API's edit of the text: one MemorySaved of the whole memory under its id."""
    session = _signed_in(request)
    check_form(session, csrf)
    named = _tenant(session, tenant)
    if not text.strip():
        raise InvalidInputError("a memory's text cannot be empty: forget it instead")
    changes = EditMemoryRecordRequest(text=text)
    await _service(request).edit(session.principal, memory_id, changes, named=named, wait=10.0)
    return _back(session, f"/console/memories/{memory_id}", named)


@console.get("/memories/{memory_id}/{action}")
async def change_page(
    request: Request,
    memory_id: str,
    action: Literal["edit", "forget"],
    tenant: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    """The page before a change: the form that edits a memory's text, or the confirmation
    that forgets it, each saying which event it writes."""
    session = _signed_in(request)
    named = _tenant(session, tenant)
    memory = await _memory(request, named, memory_id)
    return _page(f"{action}.html", session=session, tenant=named, memory=memory)


@console.post("/memories/{memory_id}/forget")
async def forget(
    request: Request,
    memory_id: str,
    csrf: Annotated[str, Form()] = "",
    tenant: Annotated[str | None, Form(max_length=256)] = None,
) -> Response:
    session = _signed_in(request)
    check_form(session, csrf)
    named = _tenant(session, tenant)
    await _memory(request, named, memory_id)
    await _service(request).delete(session.principal, [memory_id], named=named, wait=10.0)
    return _back(session, f"/console?forgotten={memory_id}", named)


def _back(session: ConsoleSession, path: str, tenant: str) -> RedirectResponse:
    """A redirect after a change to `path`, naming the tenant for an admin's session."""
    if session.principal.tenant is None:
        path += ("&" if "?" in path else "?") + f"tenant={quote(tenant)}"
    return RedirectResponse(path, 303, headers=SECURITY_HEADERS)


def _admin(request: Request, csrf: str | None = None) -> tuple[ConsoleSession, ConsoleOperations]:
    """An admin's session and the deployment's operations (ForbiddenError for a tenant key);
    with `csrf`, for a form that changes something, whose token must be the session's."""
    session = _signed_in(request)
    if csrf is not None:
        check_form(session, csrf)
    if not session.principal.admin:
        raise ForbiddenError("the operations page is for an admin key; this is a tenant's")
    operations: ConsoleOperations | None = request.app.state.operations
    if operations is None:
        raise ConfigurationError("this server was started without its operations")
    return session, operations


@console.get("/ops")
async def operations_page(
    request: Request, done: Annotated[str, Query(max_length=200)] = ""
) -> Response:
    """The admin's page: brokers, processes and their lag, shards, tenants, dead letters,
    keys, erasure."""
    session, operations = _admin(request)
    processes = await anyio.to_thread.run_sync(operations.processes)
    lags = await anyio.to_thread.run_sync(operations.lags)
    shards = await anyio.to_thread.run_sync(operations.shards)
    tenants = await anyio.to_thread.run_sync(operations.tenants, shards)
    try:
        cluster, unreachable = await operations.brokers(), None
    except KafkaUnavailableError as exc:  # the page is for outages too: say it, show the rest
        cluster, unreachable = None, str(exc)
    letters = await operations.dead_letters()
    keys: ApiKeys = request.app.state.keys
    held = await anyio.to_thread.run_sync(keys.all)
    pending = letters.pending()
    return _page(
        "ops.html", session=session, processes=processes, shards=shards,
        by_code=letters.pending_by_code(), letters=pending[-_LETTERS:], total=len(pending),
        keys=held, done=done, made=None, plot=_plot(lags, datetime.now(UTC)),
        tenants=tenants[:_TENANTS], tenant_count=len(tenants), cluster=cluster,
        unreachable=unreachable,
    )  # fmt: skip


_LETTERS = 100
_TENANTS = 100
_PLOT_W, _PLOT_H = 600.0, 120.0
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf")


def _plot(series: Sequence[LagSeries], now: datetime) -> dict[str, Any]:
    """The last hour of each process's lag as SVG coordinates: x from an hour ago (0) to now
    (`_PLOT_W`), y from the largest lag seen (0) to none (`_PLOT_H`)."""
    start = now - LAG_HISTORY
    shown = [(s, [(at, lag) for at, lag in s.points if at >= start]) for s in series]
    shown = [(s, points) for s, points in shown if points]
    top = max((lag for _, points in shown for _, lag in points), default=0) or 1
    span = LAG_HISTORY.total_seconds()
    lines = []
    for n, (s, points) in enumerate(shown):
        xy = [
            (
                round((at - start).total_seconds() / span * _PLOT_W, 1),
                round(_PLOT_H - lag / top * _PLOT_H, 1),
            )
            for at, lag in points
        ]
        lines.append(
            {
                "label": f"{s.kind} {s.host}:{s.pid}",
                "colour": _COLOURS[n % len(_COLOURS)],
                "points": " ".join(f"{x},{y}" for x, y in xy),
                "dots": xy,
                "last": points[-1][1],
            }
        )
    return {"lines": lines, "top": top, "width": _PLOT_W, "height": _PLOT_H}


@console.post("/ops/keys")
async def create_key(
    request: Request,
    csrf: Annotated[str, Form()] = "",
    tenant: Annotated[str, Form(max_length=256)] = "",
) -> Response:
    """A new key (for `tenant`; empty: an admin key), shown once on the page this answers."""
    session, _ = _admin(request, csrf)
    keys: ApiKeys = request.app.state.keys
    key, made = await anyio.to_thread.run_sync(keys.create, tenant.strip() or None)
    return _page("key_made.html", session=session, made=made, key=key)


@console.post("/ops/keys/{key_id}/revoke")
async def revoke_key(request: Request, key_id: str, csrf: Annotated[str, Form()] = "") -> Response:
    _admin(request, csrf)
    keys: ApiKeys = request.app.state.keys
    if not await anyio.to_thread.run_sync(keys.revoke, key_id):
        raise InvalidInputError(f"no key with id {key_id!r}")
    return _done(f"revoked key {key_id}")


@console.post("/ops/dead-letters/retry")
async def retry_dead_letters(
    request: Request,
    csrf: Annotated[str, Form()] = "",
    code: Annotated[str, Form(max_length=64)] = "",
) -> Response:
    _, operations = _admin(request, csrf)
    outcomes = await operations.retry(code or None)
    told = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items())) or "none pending"
    return _done(f"retried: {told}")


@console.post("/ops/erase")
async def erase(
    request: Request,
    csrf: Annotated[str, Form()] = "",
    tenant: Annotated[str, Form(max_length=256)] = "",
    confirm: Annotated[str, Form(max_length=256)] = "",
) -> Response:
    """Crypto-shred a tenant, once its id is typed a second time, exactly."""
    _, operations = _admin(request, csrf)
    named = validate_tenant(tenant)
    if confirm != tenant:
        raise InvalidInputError(
            "to erase a tenant, type its id again in the confirmation field, exactly"
        )
    erased = await anyio.to_thread.run_sync(operations.erase, named)
    return _done(f"erased tenant {named}: {len(erased.destroyed)} data keys destroyed")


def _done(said: str) -> RedirectResponse:
    """Back to the operations page, saying what was done."""
    return RedirectResponse(f"/console/ops?done={quote(said)}", 303, headers=SECURITY_HEADERS)


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
    except (InvalidInputError, MemoryNotFoundError) as exc:
        # No log here, or none of the memory's events left in it (retention, an erasure):
        # the page still shows the memory.
        return [], str(exc)
    return [entry.model_dump() for entry in found.history], None


def _moment(raw: str, name: str) -> datetime | None:
    """A time a form or link gave (ISO 8601; without a zone, UTC, as the pages show times);
    None for an empty field."""
    if not raw.strip():
        return None
    try:
        return parse_moment(raw)
    except ValueError:
        raise InvalidInputError(
            f"{name}: not a time: {raw!r} (ISO 8601, e.g. 2026-12-06T09:30:00+00:00)"
        ) from None


def _when(at: datetime | None) -> str:
    return "" if at is None else at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(at: datetime | None) -> str:
    """A time as a link's query value: exact, in UTC (a history entry's own moment)."""
    return "" if at is None else at.isoformat()


def _size(count: int) -> str:
    """Bytes as a person reads them: 812 B, 3.4 KiB, 118.0 MiB."""
    amount, unit = float(count), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if amount < 1024:
            break
        amount, unit = amount / 1024, bigger
    return f"{count} B" if unit == "B" else f"{amount:.1f} {unit}"


_templates.filters["size"] = _size
_templates.filters["when"] = _when
_templates.filters["iso"] = _iso
