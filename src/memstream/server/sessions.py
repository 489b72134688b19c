"""Working memory, the operations the HTTP API and the MCP tools share: get, put, append,
delete and list a tenant's sessions, and a session's part of `memory_prompt`.

A session is mutable state in the tenant's place (memory.ports.WorkingMemoryStore), each
change a compare-and-set on its version: a put carrying a version that is no longer current
is refused (StaleSessionError, 409); a put without one, and an append, are retried on the
newer state, so concurrent appends all keep their messages (memory.working.merge_messages).

What enters a session becomes long-term memory through the log, never by writing the
projection: each new exchange is a `TurnCompleted` of the session's thread and each
structured memory the `MemorySaved` a long-term create writes, published (and acknowledged)
before the state is stored. Their ids derive from the messages and records, so a session
sent again records nothing twice; the session also remembers what it recorded, so a long
session does not republish its history on every put.

Messages past the context window leave it when stored: with a chat model their text is
summarised into `context` (one call, its usage announced on the monitoring topic), without one
`context` says how many left. They were recorded as turns before, so long-term memory keeps
them.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
from pydantic import BaseModel, Field

from memstream.errors import (
    InvalidInputError,
    MemoryIdRetiredError,
    SessionNotFoundError,
    StaleSessionError,
)
from memstream.llm import ModelClient
from memstream.memory.events import MemoryEvent
from memstream.memory.moments import as_utc
from memstream.memory.monitoring import ModelUsage
from memstream.memory.ports import StoredSession, WorkingMemoryStore
from memstream.memory.tenancy import TenantId
from memstream.memory.working import (
    SUMMARIZATION_THRESHOLD,
    check_model_name,
    dropped_count,
    dropped_note,
    exchanges,
    merge_messages,
    message_tokens,
    summary_request,
    token_limit,
    truncated,
    turn_of,
    window,
)
from memstream.server.api_keys import Principal
from memstream.server.mapping import Scoping
from memstream.server.models import AckResponse, PromptMessage, PromptSession, TextContent
from memstream.server.session_models import (
    SESSION_FIELDS,
    SESSION_ID_PATTERN,
    MemoryMessage,
    SessionListResponse,
    UpdateWorkingMemory,
    WorkingMemory,
    WorkingMemoryResponse,
)
from memstream.server.tombstones import TombstoneChecks
from memstream.streams.event_publisher import EventPublisher

__all__ = ["MessageExtras", "SessionService", "SessionView", "Window"]

_ATTEMPTS = 20  # compare-and-set retries of one merge or append before giving up (409)
_REMEMBERED = 2_000  # recorded exchange keys and saved event ids a session keeps
_STAMPS = 64  # versions whose `last_accessed` a session remembers
_PARSED_CHARS = 64 * 1024 * 1024  # the stored sessions a server keeps parsed, in characters
_SESSION_ID = re.compile(SESSION_ID_PATTERN)


def _checked(session_id: str) -> str:
    if not _SESSION_ID.match(session_id):
        raise InvalidInputError(
            f"session id {session_id[:80]!r} is not usable: 1-256 characters of letters, "
            "digits, '.', '_', ':', '@' or '-', starting with a letter or digit"
        )
    return session_id


@dataclass(frozen=True, slots=True)
class Window:
    """The context window a request names (AMS's `model_name`, `context_window_max`)."""

    model_name: str | None = None
    context_window_max: int | None = None

    def __post_init__(self) -> None:
        check_model_name(self.model_name)  # refused at once, as AMS's routes refuse it

    @property
    def named(self) -> bool:
        return self.model_name is not None or self.context_window_max is not None

    @property
    def tokens(self) -> int:
        return token_limit(self.model_name, self.context_window_max)


class MessageExtras(BaseModel):
    """What a message written through Redis Agent Memory's API (a session event) carries
    beyond an AMS message: who said it, its parts, its metadata and when it came in."""

    actor_id: str
    parts: list[str]
    metadata: Any = None
    ingested_at: datetime
    namespace_id: str | None = None  # the namespace resource it was placed in


@dataclass(frozen=True, slots=True)
class SessionView:
    """A session as read: its working memory, its version and its messages' extras."""

    memory: WorkingMemory
    version: int
    extras: Mapping[str, MessageExtras]


class _State(BaseModel):
    """A session as stored: the working memory and what memstream keeps beside it. It is
    read and written as JSON by pydantic's core (a put reads and writes a whole session)."""

    memory: WorkingMemory
    version: int = Field(default=0, exclude=True)  # kept beside the document, not in it
    added: dict[str, int] = Field(default_factory=dict)  # message id -> version it came in
    recorded: list[str] = Field(default_factory=list)  # exchange keys recorded as turns
    saved: list[str] = Field(default_factory=list)  # MemorySaved ids published
    # `last_accessed` of recent versions -> the version: agent-memory-client puts back the
    # `last_accessed` it read, which tells which version its put was based on.
    stamps: dict[str, int] = Field(default_factory=dict)
    extras: dict[str, MessageExtras] = Field(default_factory=dict)  # message id -> extras

    def document(self) -> str:
        return self.model_dump_json()


class _Parsed:
    """The sessions this process read or wrote last, parsed, by their stored document: a
    session read again unchanged (the same document, character for character, so the same
    state whoever wrote it) is not parsed again. A put or an append reads the whole session,
    and parsing it was most of a write's own cost (docs/benchmarks.md, "serve"). The states
    held are never changed: a change makes new ones."""

    def __init__(self, max_chars: int = _PARSED_CHARS) -> None:
        self._held: OrderedDict[tuple[str, str], tuple[str, _State]] = OrderedDict()
        self._chars = 0
        self._max_chars = max_chars

    def state(self, tenant: str, stored: StoredSession) -> _State:
        key = (tenant, stored.session_id)
        held = self._held.get(key)
        if held is not None and held[0] == stored.document:
            self._held.move_to_end(key)
            state = held[1]
        else:
            state = _State.model_validate_json(stored.document)
            self.keep(tenant, stored.session_id, stored.document, state)
        return state.model_copy(update={"version": stored.version})

    def keep(self, tenant: str, session_id: str, document: str, state: _State) -> None:
        self.forget(tenant, session_id)
        if len(document) > self._max_chars // 8:
            return  # a huge session would push out every other
        self._held[(tenant, session_id)] = (document, state)
        self._chars += len(document)
        while self._chars > self._max_chars:
            _, (dropped, _) = self._held.popitem(last=False)
            self._chars -= len(dropped)

    def forget(self, tenant: str, session_id: str) -> None:
        held = self._held.pop((tenant, session_id), None)
        if held is not None:
            self._chars -= len(held[0])


class SessionService:
    def __init__(
        self,
        *,
        store: WorkingMemoryStore,
        publisher: EventPublisher,
        tombstones: TombstoneChecks,
        scoping: Scoping,
        embedding_model: str,
        summarizer: ModelClient | None = None,
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._tombstones = tombstones
        self._scoping = scoping
        self._embedding_model = embedding_model
        self._summarizer = summarizer
        self._parsed = _Parsed()

    # -- reads --------------------------------------------------------------------------------

    async def get(
        self,
        principal: Principal,
        session_id: str,
        *,
        named: str | None,
        other: str | None,
        window: Window,
        recent_messages_limit: int | None = None,
    ) -> WorkingMemoryResponse:
        """The session (404 if absent); with a window, the oldest messages that do not fit
        are left out of the answer (not the session)."""
        tenant = principal.tenant_for([named], self._scoping.tenant_field)
        state = await self._read(tenant, session_id, other)
        if state is None:
            raise SessionNotFoundError(
                f"Session {session_id} not found in this tenant; put it first "
                "(PUT /v1/working-memory/{session_id})"
            )
        memory = state.memory
        if window.named:
            memory = memory.model_copy(
                update={"messages": truncated(memory.messages, window.tokens)}
            )
        if recent_messages_limit is not None:
            memory = memory.model_copy(
                update={"messages": memory.messages[-recent_messages_limit:]}
            )
        return _response(memory, state.version, window)

    async def view(
        self, principal: Principal, session_id: str, *, named: str | None
    ) -> SessionView | None:
        """The session as stored (None: the tenant has no such session)."""
        tenant = principal.tenant_for([named], self._scoping.tenant_field)
        state = await self._read(tenant, session_id, None)
        if state is None:
            return None
        return SessionView(state.memory, state.version, state.extras)

    async def sessions(
        self,
        principal: Principal,
        *,
        named: str | None,
        other: str | None,
        offset: int,
        limit: int,
    ) -> SessionListResponse:
        tenant = principal.tenant_for([named], self._scoping.tenant_field)
        total, ids = await self._store.sessions(tenant, owner=other, offset=offset, limit=limit)
        return SessionListResponse(sessions=ids, total=total)

    async def prompt_messages(
        self, principal: Principal, session: PromptSession
    ) -> list[PromptMessage]:
        """A session's part of a prompt, as AMS builds it: its summary, then its messages
        (with a window, the most recent that fit). An unknown session has none."""
        field_name = self._scoping.tenant_field
        tenant = principal.tenant_for([getattr(session, field_name)], field_name)
        other = getattr(session, self._scoping.other_field)
        if not _SESSION_ID.match(session.session_id):
            return []  # no session can have that id
        state = await self._read(tenant, session.session_id, other)
        if state is None:
            return []
        found = Window(session.model_name, session.context_window_max)
        shown = state.memory.messages
        if found.named:
            shown = truncated(shown, found.tokens)
        prompt = []
        if state.memory.context:
            summary = f"## A summary of the conversation so far:\n{state.memory.context}"
            prompt.append(PromptMessage(role="system", content=TextContent(text=summary)))
        for message in shown:
            # AMS's prompt has user and assistant messages only: tool and system ones answer.
            prompt.append(
                PromptMessage(
                    role="user" if message.role == "user" else "assistant",
                    content=TextContent(text=message.content),
                )
            )
        return prompt

    # -- writes -------------------------------------------------------------------------------

    async def put(
        self,
        principal: Principal,
        session_id: str,
        body: UpdateWorkingMemory,
        *,
        named: str | None,
        window: Window,
    ) -> WorkingMemoryResponse:
        """Replace the session (with `body.version`: only if it is still that version); without
        a version, messages appended since the putter read it are kept."""
        if body.session_id is not None and body.session_id != session_id:
            raise InvalidInputError(
                f"the body's session_id {body.session_id!r} is not the path's {session_id!r}; "
                "leave it out or send the same"
            )
        field_name = self._scoping.tenant_field
        tenant = principal.tenant_for([named, getattr(body, field_name)], field_name)
        # The body was validated as it arrived: its session fields are taken as they are.
        fields = {name: getattr(body, name) for name in SESSION_FIELDS}
        fields[field_name] = tenant
        sent = WorkingMemory.model_construct(session_id=session_id, **fields)

        def change(state: _State | None) -> WorkingMemory:
            if state is None or body.version is not None:
                return sent
            messages = merge_messages(
                state.memory.messages,
                state.added,
                sent.messages,
                read=state.stamps.get(_stamp(body.last_accessed)),
            )
            return sent.model_copy(update={"messages": messages})

        return await self._commit(tenant, session_id, change, body.version, window)

    async def append(
        self,
        principal: Principal,
        session_id: str,
        messages: Sequence[MemoryMessage],
        *,
        named: str | None,
        other: str | None,
        window: Window,
        extras: Mapping[str, MessageExtras] | None = None,
    ) -> WorkingMemoryResponse:
        """Add `messages` at the end of the session (creating it), atomically; a message whose
        id the session already holds is not added again. `extras`: what the messages carry
        beyond AMS's fields, by message id."""
        field_name = self._scoping.tenant_field
        tenant = principal.tenant_for([named], field_name)

        def change(state: _State | None) -> WorkingMemory:
            if state is None:
                return WorkingMemory.model_validate(
                    {
                        "session_id": session_id,
                        field_name: tenant,
                        self._scoping.other_field: other,
                        "messages": list(messages),
                    }
                )
            held = {m.id for m in state.memory.messages}
            new = [m for m in messages if m.id not in held]
            return state.memory.model_copy(update={"messages": [*state.memory.messages, *new]})

        return await self._commit(tenant, session_id, change, None, window, extras or {})

    async def remove_message(
        self, principal: Principal, session_id: str, message_id: str, *, named: str | None
    ) -> bool:
        """Take one message out of the session (what it recorded stays long-term); False if
        the session or the message is not there."""
        tenant = principal.tenant_for([named], self._scoping.tenant_field)
        state = await self._read(tenant, session_id, None)
        if state is None or all(m.id != message_id for m in state.memory.messages):
            return False

        def change(state: _State | None) -> WorkingMemory:
            if state is None:
                raise SessionNotFoundError(f"Session {session_id} was deleted meanwhile")
            kept = [m for m in state.memory.messages if m.id != message_id]
            return state.memory.model_copy(update={"messages": kept})

        await self._commit(tenant, session_id, change, None, Window())
        return True

    async def delete(
        self, principal: Principal, session_id: str, *, named: str | None, other: str | None
    ) -> AckResponse:
        """Remove the session's working memory (what it recorded stays in long-term memory)."""
        tenant = principal.tenant_for([named], self._scoping.tenant_field)
        if await self._read(tenant, session_id, other) is not None:
            await self._store.delete(tenant, session_id)
            self._parsed.forget(tenant, session_id)
        return AckResponse(status="ok")

    async def _commit(
        self,
        tenant: TenantId,
        session_id: str,
        change: Callable[[_State | None], WorkingMemory],
        expected: int | None,
        window: Window,
        extras: Mapping[str, MessageExtras] | None = None,
    ) -> WorkingMemoryResponse:
        _checked(session_id)
        for _ in range(_ATTEMPTS):
            stored = await self._store.get(tenant, session_id)
            state = None if stored is None else self._parsed.state(tenant, stored)
            current = 0 if state is None else state.version
            if expected is not None and expected != current:
                raise _stale(session_id, expected, current)
            memory = change(state)
            new = await self._record(tenant, session_id, memory, state)
            memory = await self._windowed(tenant, session_id, memory, window)
            now = datetime.now(UTC)
            memory = memory.model_copy(
                update={
                    "created_at": state.memory.created_at if state else memory.created_at,
                    "updated_at": now,
                    "last_accessed": now,
                }
            )
            version = current + 1
            kept = {
                m.id: (state.added.get(m.id, version) if state else version)
                for m in memory.messages
            }
            stamps = {**(state.stamps if state else {}), _stamp(now): version}
            known = {**(state.extras if state else {}), **(extras or {})}
            after = _State(
                memory=memory,
                version=version,
                added=kept,
                recorded=[*(state.recorded if state else ()), *new.recorded][-_REMEMBERED:],
                saved=[*(state.saved if state else ()), *new.saved][-_REMEMBERED:],
                stamps=dict(list(stamps.items())[-_STAMPS:]),
                extras={m.id: known[m.id] for m in memory.messages if m.id in known},
            )
            other = getattr(memory, self._scoping.other_field)
            document = after.document()
            try:
                await self._store.put(
                    tenant,
                    session_id,
                    document,
                    expected_version=current,
                    ttl_s=memory.ttl_seconds,
                    owner=other,
                )
            except StaleSessionError as exc:
                if expected is not None:
                    raise _stale(session_id, expected, exc.current) from None
                continue
            self._parsed.keep(tenant, session_id, document, after)
            return _response(memory, version, window)
        raise _stale(session_id, current, -1)

    async def _record(
        self, tenant: str, session_id: str, memory: WorkingMemory, state: _State | None
    ) -> _Recorded:
        """Publish the session's exchanges and memories not recorded yet (acknowledged)."""
        recorded = set(state.recorded if state else ())
        saved = set(state.saved if state else ())
        events: list[MemoryEvent] = []
        done = _Recorded()
        asked = memory.long_term_memory_strategy  # the extraction job reads it off each turn
        for exchange in exchanges(memory.messages):
            if exchange.key in recorded:
                continue
            events.append(
                turn_of(
                    tenant,
                    session_id,
                    exchange,
                    embedding_model=self._embedding_model,
                    default_importance=self._scoping.default_importance,
                    max_chars=self._scoping.max_record_chars,
                    strategy=asked.strategy,
                    custom_prompt=str(asked.config.get("custom_prompt") or ""),
                )
            )
            done.recorded.append(exchange.key)
        records = []
        for record in memory.memories:
            if record.session_id is None:
                record = record.model_copy(update={"session_id": session_id})
            event = self._scoping.saved(record, tenant, self._embedding_model)
            if event.id not in saved:
                records.append(event)
        if records:
            ids = sorted({event.memory_id for event in records})
            retired = await self._tombstones.forgotten(tenant, ids)
            if retired:
                raise MemoryIdRetiredError(
                    f"{len(retired)} memory id(s) in this session's memories were deleted "
                    f"before ({', '.join(sorted(retired)[:5])}); a deleted id is never used "
                    "again, so nothing was stored: give those memories new ids"
                )
            events.extend(records)
            done.saved.extend(event.id for event in records)
        if events:
            await self._publisher.publish(events)
        return done

    async def _windowed(
        self, tenant: str, session_id: str, memory: WorkingMemory, limits: Window
    ) -> WorkingMemory:
        """The session with the messages past the window moved into `context`."""
        split = window(memory.messages, limits.tokens)
        if not split.dropped:
            return memory
        messages = list(split.kept)
        if self._summarizer is None:
            context = dropped_note(
                memory.context, dropped_count(memory.context) + len(split.dropped)
            )
            return memory.model_copy(update={"messages": messages, "context": context})
        client = self._summarizer
        reply = await anyio.to_thread.run_sync(
            client.complete, summary_request(memory.context, split.dropped)
        )
        usage = reply.usage
        await self._publisher.announce(
            ModelUsage(
                tenant=tenant,
                thread=session_id,
                purpose="working-memory-summary",
                calls=max(usage.calls, 1),
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                at=datetime.now(UTC),
            )
        )
        return memory.model_copy(
            update={
                "messages": messages,
                "context": reply.message.content,
                "tokens": memory.tokens + usage.input_tokens + usage.output_tokens,
            }
        )

    async def _read(self, tenant: TenantId, session_id: str, other: str | None) -> _State | None:
        stored = await self._store.get(tenant, _checked(session_id))
        if stored is None:
            return None
        state = self._parsed.state(tenant, stored)
        if other is not None and getattr(state.memory, self._scoping.other_field) != other:
            return None  # AMS keys a session by its user id too: another one's is not found
        return state


@dataclass(slots=True)
class _Recorded:
    recorded: list[str] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)


def _response(memory: WorkingMemory, version: int, window: Window) -> WorkingMemoryResponse:
    total: float | None = None
    until: float | None = None
    if window.named:
        used = sum(map(message_tokens, memory.messages))
        limit = window.tokens
        threshold = int(limit * SUMMARIZATION_THRESHOLD)
        total = min(used / limit * 100.0, 100.0) if memory.messages else 0.0
        until = (
            (min(used / threshold * 100.0, 100.0) if threshold > 0 else 100.0)
            if memory.messages
            else 0.0
        )
    # Built from the session as held, not validated again (FastAPI serialises it as it is).
    return WorkingMemoryResponse.model_construct(
        **dict(memory),
        version=version,
        context_percentage_total_used=total,
        context_percentage_until_summarization=until,
    )


def _stamp(at: datetime) -> str:
    return as_utc(at).astimezone(UTC).isoformat()


def _stale(session_id: str, expected: int, current: int) -> StaleSessionError:
    now = f"it is at version {current}" if current >= 0 else "other puts kept coming first"
    return StaleSessionError(
        f"session {session_id!r} changed since version {expected} ({now}), so this put was "
        "not stored: GET it again, apply your change to what it holds and PUT with the "
        "version it answers; or PUT without `version` to keep messages appended meanwhile",
        current=current,
    )
