"""The MCP server: agent-memory-server's long-term and working-memory tools on the official
SDK (`mcp` 2.x, `MCPServer`), over stdio (`memstream mcp --tenant T`) or streamable HTTP at
`/mcp` of `memstream serve`.

The tools take AMS's names and arguments and call the same `MemoryService` as the HTTP
routes. Each tool is a module-level function; what it depends on (the service, and the
caller's principal) it receives from the server it runs in (`MemoryTools`, through its
`Context`), as the HTTP routes receive theirs through `Depends`. The tenant never comes
from a tool argument: over stdio it is the `--tenant` the server was started with; over HTTP
it is the tenant of the request's API key (an admin key, or none, is refused: a tool call
cannot say which tenant it means). A tool argument naming another tenant (`namespace` by
default) is refused like the HTTP API's 403. Errors come back as tool errors carrying
memstream's stable `code`, and whether a retry may help.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, cast

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from memstream import __version__
from memstream.errors import ForbiddenError, MemstreamError, SessionNotFoundError
from memstream.server.api_keys import ApiKeys, Principal
from memstream.server.models import (
    MEMORY_ID_PATTERN,
    AckResponse,
    DateFilter,
    EditMemoryRecordRequest,
    MemoryHistory,
    MemoryPromptRequest,
    MemoryRecord,
    MemoryRecordResults,
    MemoryTypeEnum,
    MemoryTypeFilter,
    PromptSession,
    SearchModeEnum,
    SearchRequest,
    StoredMemoryRecord,
    TagFilter,
)
from memstream.server.service import MemoryService
from memstream.server.session_models import (
    MemoryMessage,
    MemoryStrategyConfig,
    UpdateWorkingMemory,
    WorkingMemory,
    WorkingMemoryResponse,
)
from memstream.server.sessions import Window

__all__ = [
    "TOOLS",
    "LenientMemoryRecord",
    "MemoryTools",
    "build_mcp",
    "http_principal",
    "key_principal",
    "stdio_principal",
]

PrincipalOf = Callable[[Context], Principal]


class LenientMemoryRecord(MemoryRecord):
    """A record from a model, which seldom invents ids: one is made up when it gives none
    (so a retried tool call may save twice; clients that care send ids)."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex, pattern=MEMORY_ID_PATTERN)


def stdio_principal(tenant: str) -> PrincipalOf:
    fixed = Principal(tenant)
    return lambda _: fixed


def key_principal(keys: ApiKeys, authorization: str | None, *, keyless: bool) -> Principal:
    """The tenant principal of an MCP request over HTTP: its key's tenant. An admin key, or
    none on a keyless server, is refused: a tool call cannot say which tenant it means."""
    found = keys.authenticate(authorization, keyless=keyless)
    if found.admin:
        raise ForbiddenError(
            "MCP tools act for the tenant of the API key, and this key (or the keyless "
            "server) has none; connect with a tenant key (`memstream keys create --tenant T`)"
        )
    return found


def http_principal(keys: ApiKeys, *, keyless: bool) -> PrincipalOf:
    def principal(context: Context) -> Principal:
        headers = context.headers or {}
        return key_principal(keys, headers.get("authorization"), keyless=keyless)

    return principal


def _tool_error(exc: MemstreamError) -> ToolError:
    retry = "retryable" if exc.retryable else "not retryable"
    return ToolError(f"[{exc.code}, {retry}] {exc}")


class MemoryTools(MCPServer[Any]):
    """The MCP server of the memory tools: what the tools depend on, for them to receive.

    `service` gives the memory service when a tool runs (it is opened with the server, so it
    is looked up per call); `principal_of` says whom a call acts for."""

    def __init__(
        self, service: Callable[[], MemoryService], principal_of: PrincipalOf, **kw: Any
    ) -> None:
        super().__init__(
            "memstream",
            version=__version__,
            instructions="Long-term memory of this tenant: search it before answering, save "
            "what is worth keeping (resolved: no pronouns, absolute dates).",
            **kw,
        )
        self.service = service
        self.principal_of = principal_of


async def _call(
    context: Context, work: Callable[[MemoryService, Principal], Awaitable[Any]]
) -> Any:
    """`work` with the tools' service, for the caller's principal; memstream's errors become
    tool errors."""
    tools = cast(MemoryTools, context.mcp_server)
    try:
        principal = await anyio.to_thread.run_sync(tools.principal_of, context)
        return await work(tools.service(), principal)
    except MemstreamError as exc:
        raise _tool_error(exc) from exc


async def create_long_term_memories(
    memories: list[LenientMemoryRecord], ctx: Context
) -> AckResponse:
    """Save long-term memories for later search. Resolve pronouns and relative dates
    first; `memory_type` is "semantic" (facts, preferences) or "episodic" (events)."""
    return await _call(ctx, lambda s, p: s.create(p, memories, wait=None))  # type: ignore[no-any-return]


async def search_long_term_memory(
    ctx: Context,
    text: str | None = None,
    search_mode: SearchModeEnum = SearchModeEnum.HYBRID,
    session_id: TagFilter | None = None,
    namespace: TagFilter | None = None,
    topics: TagFilter | None = None,
    entities: TagFilter | None = None,
    created_at: DateFilter | None = None,
    last_accessed: DateFilter | None = None,
    user_id: TagFilter | None = None,
    memory_type: MemoryTypeFilter | None = None,
    event_date: DateFilter | None = None,
    distance_threshold: float | None = None,
    limit: int = 10,
    offset: int = 0,
    as_of: datetime | None = None,
) -> MemoryRecordResults:
    """Search long-term memories by words, meaning or both (hybrid, the default), with
    filters; results best first, with `total` and `next_offset` for paging. With `as_of`
    (a time), search the memory as it stood then (hybrid, no filters)."""
    request = _search(
        text=text,
        search_mode=search_mode,
        session_id=session_id,
        namespace=namespace,
        topics=topics,
        entities=entities,
        created_at=created_at,
        last_accessed=last_accessed,
        user_id=user_id,
        memory_type=memory_type,
        event_date=event_date,
        distance_threshold=distance_threshold,
        limit=limit,
        offset=offset,
        as_of=as_of,
    )
    return await _call(  # type: ignore[no-any-return]
        ctx, lambda s, p: anyio.to_thread.run_sync(s.search, p, request)
    )


async def long_term_memory_history(memory_id: str, ctx: Context) -> MemoryHistory:
    """Every change to one long-term memory, oldest first, from the log: recorded, edited,
    consolidated into a summary, forgotten, evicted, expired, erased; with times and the
    event that made each."""
    return await _call(  # type: ignore[no-any-return]
        ctx, lambda s, p: anyio.to_thread.run_sync(lambda: s.history(p, memory_id, named=None))
    )


async def get_long_term_memory(memory_id: str, ctx: Context) -> StoredMemoryRecord:
    """One long-term memory by its id, with where it came from (`provenance`)."""
    return await _call(  # type: ignore[no-any-return]
        ctx, lambda s, p: anyio.to_thread.run_sync(lambda: s.get(p, memory_id, named=None))
    )


async def edit_long_term_memory(
    memory_id: str,
    ctx: Context,
    text: str | None = None,
    topics: list[str] | None = None,
    entities: list[str] | None = None,
    memory_type: MemoryTypeEnum | None = None,
    session_id: str | None = None,
    event_date: str | None = None,
    pinned: bool | None = None,
) -> MemoryRecord:
    """Change some fields of a long-term memory; the rest stays as it is."""
    given = {
        "text": text,
        "topics": topics,
        "entities": entities,
        "memory_type": memory_type,
        "session_id": session_id,
        "event_date": event_date,
        "pinned": pinned,
    }
    try:
        changes = EditMemoryRecordRequest.model_validate(
            {name: value for name, value in given.items() if value is not None}
        )
    except ValueError as exc:
        raise ToolError(f"[invalid_input, not retryable] {exc}") from None
    return await _call(  # type: ignore[no-any-return]
        ctx, lambda s, p: s.edit(p, memory_id, changes, named=None, wait=None)
    )


async def delete_long_term_memories(memory_ids: list[str], ctx: Context) -> AckResponse:
    """Delete long-term memories by id; a deleted id is never used again."""
    return await _call(  # type: ignore[no-any-return]
        ctx, lambda s, p: s.delete(p, memory_ids, named=None, wait=None)
    )


async def memory_prompt(
    query: str,
    ctx: Context,
    session_id: TagFilter | None = None,
    namespace: TagFilter | None = None,
    topics: TagFilter | None = None,
    entities: TagFilter | None = None,
    created_at: DateFilter | None = None,
    user_id: TagFilter | None = None,
    memory_type: MemoryTypeFilter | None = None,
    event_date: DateFilter | None = None,
    search_mode: SearchModeEnum = SearchModeEnum.HYBRID,
    limit: int = 10,
    offset: int = 0,
    model_name: str | None = None,
    context_window_max: int | None = None,
    include_long_term_search: bool = True,
) -> dict[str, Any]:
    """The messages to send a model for `query`: with a session (`session_id.eq`), its
    summary and recent messages (within `model_name`/`context_window_max`); then the
    `semantic-memory` section of what this tenant's memory holds about it (unless
    `include_long_term_search` is false); then the query."""
    search = _search(
        text=query,
        search_mode=search_mode,
        namespace=namespace,
        topics=topics,
        entities=entities,
        created_at=created_at,
        user_id=user_id,
        memory_type=memory_type,
        event_date=event_date,
        limit=limit,
        offset=offset,
    )
    session = None
    if session_id is not None and session_id.eq is not None:
        session = _prompt_session(session_id.eq, model_name, context_window_max)
    request = MemoryPromptRequest(
        query=query, session=session, long_term_search=search if include_long_term_search else False
    )
    response = await _call(ctx, lambda s, p: s.prompt(p, request))
    return dict(response.model_dump(mode="json"))


async def set_working_memory(
    session_id: str,
    ctx: Context,
    memories: list[LenientMemoryRecord] | None = None,
    messages: list[MemoryMessage] | None = None,
    context: str | None = None,
    data: dict[str, Any] | None = None,
    namespace: str | None = None,
    user_id: str | None = None,
    ttl_seconds: int = 3600,
    long_term_memory_strategy: MemoryStrategyConfig | None = None,
) -> WorkingMemoryResponse:
    """Set a session's working memory: its messages, structured memories (each saved as a
    long-term memory), JSON data and context summary. Replaces what the session held, except
    messages appended since it was read."""
    fields: dict[str, Any] = {
        "memories": memories or [],
        "messages": messages or [],
        "context": context,
        "data": data,
        "namespace": namespace,
        "user_id": user_id,
        "ttl_seconds": ttl_seconds,
    }
    if long_term_memory_strategy is not None:
        fields["long_term_memory_strategy"] = long_term_memory_strategy
    try:
        body = UpdateWorkingMemory.model_validate(fields)
    except ValueError as exc:
        raise ToolError(f"[invalid_input, not retryable] {exc}") from None
    return await _call(  # type: ignore[no-any-return]
        ctx, lambda s, p: s.sessions.put(p, session_id, body, named=None, window=Window())
    )


async def get_working_memory(
    session_id: str,
    ctx: Context,
    user_id: str | None = None,
    namespace: str | None = None,
    recent_messages_limit: int | None = None,
) -> WorkingMemory:
    """A session's working memory: its recent messages, structured memories, data and the
    summary of older messages (empty for a session never set)."""

    async def get(service: MemoryService, principal: Principal) -> WorkingMemory:
        field = service.scoping.tenant_field
        named, other = (namespace, user_id) if field == "namespace" else (user_id, namespace)
        try:
            return await service.sessions.get(
                principal,
                session_id,
                named=named,
                other=other,
                window=Window(),
                recent_messages_limit=recent_messages_limit,
            )
        except SessionNotFoundError:
            return WorkingMemory(session_id=session_id)

    return await _call(ctx, get)  # type: ignore[no-any-return]


async def compact_long_term_memories(
    ctx: Context,
    namespace: str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
) -> AckResponse:
    """Merge exact duplicates in long-term memory (same text, type, session and user) into
    one memory each; says how many memories remain. Different texts are never merged."""

    async def compact(service: MemoryService, principal: Principal) -> AckResponse:
        field = service.scoping.tenant_field
        named, other = (namespace, user_id) if field == "namespace" else (user_id, namespace)
        return await service.compact(
            principal, named=named, other=other, session_id=session_id, wait=None
        )

    return await _call(ctx, compact)  # type: ignore[no-any-return]


async def get_current_datetime() -> dict[str, str | int]:
    """The current date and time in UTC (`iso_utc`, to the second, ending in Z) and as Unix
    seconds (`unix_ts`): for resolving "today", "last week" before a search or a save."""
    now = datetime.now(UTC).replace(microsecond=0)
    return {"iso_utc": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "unix_ts": int(now.timestamp())}


TOOLS: tuple[Callable[..., Awaitable[Any]], ...] = (
    create_long_term_memories,
    search_long_term_memory,
    get_long_term_memory,
    long_term_memory_history,
    edit_long_term_memory,
    delete_long_term_memories,
    memory_prompt,
    set_working_memory,
    get_working_memory,
    compact_long_term_memories,
    get_current_datetime,
)


def build_mcp(
    service: Callable[[], MemoryService], principal_of: PrincipalOf, **kw: Any
) -> MemoryTools:
    """The MCP server with every tool; `service` gives the memory service when a tool runs."""
    server = MemoryTools(service, principal_of, **kw)
    for tool in TOOLS:
        server.add_tool(tool)
    return server


def _prompt_session(
    session_id: str, model_name: str | None, context_window_max: int | None
) -> PromptSession:
    try:
        return PromptSession(
            session_id=session_id, model_name=model_name, context_window_max=context_window_max
        )
    except ValueError as exc:
        raise ToolError(f"[invalid_input, not retryable] {exc}") from None


def _search(**fields: Any) -> SearchRequest:
    try:
        return SearchRequest.model_validate(fields)
    except ValueError as exc:
        raise ToolError(f"[invalid_input, not retryable] {exc}") from None
