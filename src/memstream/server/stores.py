"""Redis Agent Memory's store-scoped operations on memstream: a store is a tenant.

The store API (the `redis-agent-memory` SDK) names a store in every path; a tenant key serves
exactly its own store (`storeId` = the tenant id), another store is 403, an admin key serves
any. Everything goes through the operations the AMS routes use, so the one log, the one
ranking and the one tenant boundary hold here too:

- session events are working-memory messages (`SessionService`): appended atomically, each
  exchange recorded through the log as a turn of the session's thread, so it is recallable
  from every session and feeds extraction; the event's actor, parts, metadata and time of
  arrival are kept beside the message. A session's owner is the actor of the event that
  created it (AMS's `user_id`).
- long-term memories are `MemorySaved` / `MemoryForgotten` events (`MemoryService`): the
  client's id is the idempotency key, `ownerId` is AMS's `user_id`, the deprecated
  `namespace` label and the `attributes` are kept in the memory's reserved metadata.
- search is the hybrid ranking every search uses (semantic, with a threshold, when
  `similarityThreshold` is given); the store's filters run in the index where they can
  (sessions, types, time with `filterOp` all) and on the candidates otherwise.

- namespace resources are server.namespaces' events; a memory placed in one keeps its id in
  its reserved metadata (`ams.namespace_ref`), a session event in its message's extras, and
  both answer the namespace's current name and path.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import anyio

from memstream.errors import (
    InfrastructureError,
    InvalidInputError,
    MemoryNotFoundError,
    NamespaceConflictError,
    SessionNotFoundError,
)
from memstream.memory.events import MemoryForgotten, MemorySaved, check_memory_id
from memstream.memory.model import RESERVED_PREFIX, TOPICS, Memory
from memstream.memory.ports import MAX_RECALL_K
from memstream.memory.search import SearchFilter, SearchMode
from memstream.memory.tenancy import TenantId
from memstream.server.api_keys import Principal
from memstream.server.models import MemoryRecord, MemoryTypeEnum
from memstream.server.namespaces import PLACED, Hierarchy, Namespaces
from memstream.server.service import MemoryService
from memstream.server.session_models import MemoryMessage
from memstream.server.sessions import MessageExtras, SessionView, Window
from memstream.server.store_models import (
    AddSessionEventRequest,
    AttributeClause,
    BulkCreateRequest,
    BulkCreateResponse,
    BulkDeleteRequest,
    BulkDeleteResponse,
    BulkError,
    FeatureHealth,
    FilterConjunction,
    LongTermMemoryFilter,
    MessageRole,
    MoveRequest,
    MoveResponse,
    NamespaceRef,
    SearchRequest,
    SearchResponse,
    SessionEvent,
    SessionList,
    SessionMemory,
    SessionSummary,
    StoreHealth,
    StoreMemory,
    TextPart,
    TimeFilter,
    UpdateMemory,
    UpdateMemoryFields,
    ValueFilter,
    page_offset,
    page_token_at,
)

__all__ = ["StoreService"]

# Reserved metadata the store API keeps; `ams.user_id` is AMS's own user field.
_OWNER = f"{RESERVED_PREFIX}user_id"
_LABEL = f"{RESERVED_PREFIX}namespace"
_ATTRIBUTES = f"{RESERVED_PREFIX}attributes"
_KEPT = (_OWNER, _LABEL, _ATTRIBUTES, PLACED)  # what an edit keeps unless it changes it
_ROLES = {MessageRole.USER: "user", MessageRole.ASSISTANT: "assistant"}
_MAX_SESSIONS_PAGE = 1000


def _memory_type(raw: str | None) -> MemoryTypeEnum:
    """A store memory type (any case) as AMS's; none is `semantic`."""
    if raw is None:
        return MemoryTypeEnum.SEMANTIC
    try:
        return MemoryTypeEnum(raw.lower())
    except ValueError:
        known = ", ".join(t.value for t in MemoryTypeEnum)
        raise InvalidInputError(
            f"memoryType {raw[:80]!r} is not one this store has: {known} (custom memory "
            "types are not served)"
        ) from None


class StoreService:
    """The store API's operations, for one request's caller and store each."""

    def __init__(self, memories: MemoryService) -> None:
        self._memories = memories
        self._sessions = memories.sessions
        self._scoping = memories.scoping
        self._embedding_model = memories.embedding_model
        self.namespaces = Namespaces(memories)

    def tenant(self, principal: Principal, store_id: str) -> TenantId:
        """The tenant a store names, if the caller may use it (403 otherwise)."""
        return principal.tenant_for([store_id], "storeId")

    # -- health -------------------------------------------------------------------------------

    async def health(self, principal: Principal, store_id: str) -> StoreHealth:
        tenant = self.tenant(principal, store_id)
        try:
            await self._memories.lookup(tenant, ["health"])
            status = "healthy"
        except InfrastructureError:
            status = "unavailable"
        parts = ("sessionMemory", "longTermMemory")
        features = {name: FeatureHealth(status=status) for name in parts}
        return StoreHealth(status=status, features=features)

    # -- session memory -----------------------------------------------------------------------

    async def add_event(
        self, principal: Principal, store_id: str, request: AddSessionEventRequest
    ) -> SessionEvent:
        tenant = self.tenant(principal, store_id)
        placed = None
        if request.namespace_ref is not None:
            placed = await self.namespaces.placement(tenant, request.namespace_ref.namespace_id)
        session_id = request.session_id or uuid.uuid4().hex
        event_id = uuid.uuid4().hex
        parts = [part.text for part in request.content]
        message = MemoryMessage(
            role=_ROLES.get(request.role, "system"),
            content="\n".join(parts),
            id=event_id,
            created_at=request.created_at,
        )
        extras = MessageExtras(
            actor_id=request.actor_id,
            parts=parts,
            metadata=request.metadata,
            ingested_at=datetime.now(UTC),
            namespace_id=placed.namespace_id if placed is not None else None,
        )
        await self._sessions.append(
            principal,
            session_id,
            [message],
            named=tenant,
            other=request.actor_id,
            window=Window(),
            extras={event_id: extras},
        )
        return _event(session_id, message, extras)

    async def session(self, principal: Principal, store_id: str, session_id: str) -> SessionMemory:
        view = await self._view(principal, store_id, session_id)
        memory = view.memory
        owner = getattr(memory, self._scoping.other_field) or ""
        events = [_event(session_id, m, view.extras.get(m.id)) for m in memory.messages]
        summary = None
        if memory.context:
            summary = SessionSummary(
                text=memory.context,
                summarized_up_to_event_id="",
                created_at=memory.created_at,
                updated_at=memory.updated_at,
                summarized_events=0,
            )
        places = [e.namespace_id for e in view.extras.values() if e.namespace_id is not None]
        placed = None
        if places:  # the latest placement
            tenant = self.tenant(principal, store_id)
            placed = (await self.namespaces.hierarchy(tenant)).placed(places[-1])
        return SessionMemory(
            session_id=session_id,
            owner_id=owner,
            events=events,
            namespace_ref=placed,
            summary=summary,
        )

    async def session_event(
        self, principal: Principal, store_id: str, session_id: str, event_id: str
    ) -> SessionEvent:
        view = await self._view(principal, store_id, session_id)
        for message in view.memory.messages:
            if message.id == event_id:
                return _event(session_id, message, view.extras.get(message.id))
        raise MemoryNotFoundError(f"no event {event_id[:80]!r} in session {session_id!r}")

    async def delete_event(
        self, principal: Principal, store_id: str, session_id: str, event_id: str
    ) -> None:
        tenant = self.tenant(principal, store_id)
        if not await self._sessions.remove_message(principal, session_id, event_id, named=tenant):
            raise MemoryNotFoundError(f"no event {event_id[:80]!r} in session {session_id!r}")

    async def delete_session(self, principal: Principal, store_id: str, session_id: str) -> None:
        await self._view(principal, store_id, session_id)  # 404 for a session it does not have
        await self._sessions.delete(principal, session_id, named=store_id, other=None)

    async def sessions(
        self,
        principal: Principal,
        store_id: str,
        *,
        limit: int,
        page_token: str | None,
        owner: str | None,
        include_all: bool | None,
    ) -> SessionList:
        tenant = self.tenant(principal, store_id)
        if (owner is None) == (not include_all):
            raise InvalidInputError(
                "name the sessions to list: filterOwnerId=OWNER, or includeAll=true for all "
                "of them (not both)"
            )
        if not 1 <= limit <= _MAX_SESSIONS_PAGE:
            raise InvalidInputError(f"limit must be between 1 and {_MAX_SESSIONS_PAGE}")
        offset = page_offset(page_token)
        listed = await self._sessions.sessions(
            principal, named=tenant, other=owner, offset=offset, limit=limit
        )
        end = offset + len(listed.sessions)
        more = page_token_at(end) if end < listed.total and listed.sessions else None
        return SessionList(items=listed.sessions, total=listed.total, next_page_token=more)

    async def _view(self, principal: Principal, store_id: str, session_id: str) -> SessionView:
        tenant = self.tenant(principal, store_id)
        view = await self._sessions.view(principal, session_id, named=tenant)
        if view is None:
            raise SessionNotFoundError(f"no session {session_id[:80]!r} in this store")
        return view

    # -- long-term memory ---------------------------------------------------------------------

    async def create(
        self, principal: Principal, store_id: str, request: BulkCreateRequest
    ) -> BulkCreateResponse:
        """Each memory written once (its id is the idempotency key); a memory that cannot be
        written is named in `errors` with the reason, and the others are written."""
        tenant = self.tenant(principal, store_id)
        self._memories.limits.records(len(request.memories))
        events: list[MemorySaved] = []
        errors: list[BulkError] = []
        hierarchy = None
        if any(m.namespace_ref is not None for m in request.memories):
            hierarchy = await self.namespaces.hierarchy(tenant)
        for memory in request.memories:
            try:
                place = None
                if hierarchy is not None and memory.namespace_ref is not None:
                    place = hierarchy.placement(memory.namespace_ref.namespace_id).namespace_id
                record = MemoryRecord(
                    id=memory.id,
                    text=memory.text,
                    session_id=memory.session_id,
                    topics=memory.topics,
                    memory_type=_memory_type(memory.memory_type),
                )
                reserved = _reserved(memory.owner_id, memory.namespace, memory.attributes)
                if place is not None:
                    reserved[PLACED] = place
                events.append(
                    self._scoping.saved(record, tenant, self._embedding_model, reserved=reserved)
                )
            except (MemoryNotFoundError, NamespaceConflictError, ValueError) as exc:
                errors.append(BulkError(id=memory.id, error=_reason(exc)))
        retired = await self._memories.retired(tenant, [e.memory_id for e in events])
        errors += [
            BulkError(id=e.memory_id, error="this id was deleted before and is never used again")
            for e in events
            if e.memory_id in retired
        ]
        written = [e for e in events if e.memory_id not in retired]
        if written:
            await self._memories.write(written, None)
        return BulkCreateResponse(created=[e.memory_id for e in written], errors=errors or None)

    async def delete(
        self, principal: Principal, store_id: str, request: BulkDeleteRequest
    ) -> BulkDeleteResponse:
        """Forget the memories (one event): every valid id is retired, so a write of it still
        on its way is not stored either; ids the store did not hold are named in `errors`."""
        tenant = self.tenant(principal, store_id)
        errors: list[BulkError] = []
        valid: list[str] = []
        for memory_id in dict.fromkeys(request.memory_ids):
            try:
                valid.append(check_memory_id(memory_id))
            except InvalidInputError as exc:
                errors.append(BulkError(id=memory_id[:128], error=_reason(exc)))
        held = await self._memories.lookup(tenant, valid) if valid else []
        deleted = [i for i, memory in zip(valid, held, strict=True) if memory is not None]
        errors += [
            BulkError(id=i, error="not found in this store (the id is retired all the same)")
            for i, memory in zip(valid, held, strict=True)
            if memory is None
        ]
        if valid:
            forget = MemoryForgotten(
                tenant=tenant,
                request_id=uuid.uuid4().hex,
                requested_at=datetime.now(UTC),
                memory_ids=tuple(valid),
            )
            await self._memories.write([forget], None)
        return BulkDeleteResponse(deleted=deleted, errors=errors or None)

    async def get(self, principal: Principal, store_id: str, memory_id: str) -> StoreMemory:
        tenant = self.tenant(principal, store_id)
        (answer,) = await self._answers(tenant, [await self._held(tenant, memory_id)])
        return answer

    async def update(
        self, principal: Principal, store_id: str, memory_id: str, changes: UpdateMemory
    ) -> StoreMemory:
        """Change some fields: the whole new memory saved under its id (its time stays)."""
        tenant = self.tenant(principal, store_id)
        given = changes.model_fields_set
        fields: dict[str, Any] = {}
        if "text" in given and changes.text is not None:
            fields["text"] = changes.text
        if "memory_type" in given and changes.memory_type is not None:
            fields["memory_type"] = _memory_type(changes.memory_type)
        if "topics" in given:
            fields["topics"] = changes.topics
        if "session_id" in given:
            fields["session_id"] = changes.session_id
        reserved: dict[str, str | None] = {}
        if "owner_id" in given and changes.owner_id is not None:
            reserved[_OWNER] = changes.owner_id
        if "namespace" in given:
            reserved[_LABEL] = changes.namespace
        reserved.update(await self._placed(tenant, changes.namespace_ref))
        saved = await self._save(tenant, await self._held(tenant, memory_id), fields, reserved)
        (answer,) = await self._answers(tenant, [saved])
        return answer

    async def update_fields(
        self, principal: Principal, store_id: str, memory_id: str, changes: UpdateMemoryFields
    ) -> StoreMemory:
        """Change a memory's text and attributes (merged), for a memory of `memoryType`."""
        tenant = self.tenant(principal, store_id)
        memory = await self._held(tenant, memory_id)
        kind = self._scoping.record(memory)["memory_type"]
        if _memory_type(changes.memory_type) != kind:
            raise InvalidInputError(
                f"memory {memory_id!r} is of type {kind}, not {changes.memory_type!r}: "
                "send the memory's own type"
            )
        fields: dict[str, Any] = {} if changes.text is None else {"text": changes.text}
        reserved: dict[str, str | None] = {}
        if changes.attributes is not None:
            merged = {**(_attributes(memory) or {}), **changes.attributes}
            reserved[_ATTRIBUTES] = json.dumps(merged)
        if "namespace" in changes.model_fields_set:
            reserved[_LABEL] = changes.namespace
        reserved.update(await self._placed(tenant, changes.namespace_ref))
        (answer,) = await self._answers(
            tenant, [await self._save(tenant, memory, fields, reserved)]
        )
        return answer

    async def move(self, principal: Principal, store_id: str, request: MoveRequest) -> MoveResponse:
        """Place each memory in an active namespace (each saved again with it); ids the store
        does not hold are named in `errors`."""
        tenant = self.tenant(principal, store_id)
        place = await self.namespaces.placement(tenant, request.namespace_ref.namespace_id)
        ids = list(dict.fromkeys(request.memory_ids))
        for memory_id in ids:
            check_memory_id(memory_id)
        held = await self._memories.lookup(tenant, ids)
        placed = {PLACED: place.namespace_id}
        events = [self._edit(tenant, m, {}, placed) for m in held if m is not None]
        if events:  # one publish for them all
            await self._memories.write(events, None)
        errors = [
            BulkError(id=memory_id, error="not found in this store")
            for memory_id, memory in zip(ids, held, strict=True)
            if memory is None
        ]
        return MoveResponse(moved=[e.memory_id for e in events], errors=errors or None)

    async def search(
        self, principal: Principal, store_id: str, request: SearchRequest
    ) -> SearchResponse:
        tenant = self.tenant(principal, store_id)
        offset = page_offset(request.page_token)
        where, keep = _plan(tenant, request.filter, request.filter_op, self._scoping.record)
        threshold = request.similarity_threshold
        mode = SearchMode.HYBRID if threshold is None else SearchMode.SEMANTIC
        limit = min(request.limit, max(MAX_RECALL_K - offset, 0))
        if limit == 0:
            return SearchResponse(items=[])
        page = await anyio.to_thread.run_sync(
            partial(
                self._memories.find,
                where,
                request.text or "",
                mode=mode,
                limit=limit,
                offset=offset,
                max_distance=None if threshold is None else 1.0 - threshold,
                keep=keep,
            )
        )
        end = offset + len(page.hits)
        more = page_token_at(end) if page.hits and end < page.total else None
        answers = await self._answers(tenant, [hit.memory for hit in page.hits])
        return SearchResponse(items=answers, next_page_token=more)

    async def _held(self, tenant: TenantId, memory_id: str) -> Memory:
        check_memory_id(memory_id)
        (memory,) = await self._memories.lookup(tenant, [memory_id])
        if memory is None:
            raise MemoryNotFoundError(f"no memory with id {memory_id!r} in this store")
        return memory

    async def _save(
        self,
        tenant: TenantId,
        memory: Memory,
        fields: Mapping[str, Any],
        reserved: Mapping[str, str | None],
    ) -> Memory:
        """Save `memory` again with `fields` and its store metadata changed (None: removed);
        the memory as saved."""
        event = self._edit(tenant, memory, fields, reserved)
        await self._memories.write([event], None)
        return replace(
            memory,
            content=event.content,
            thread=event.thread,
            memory_type=event.memory_type,
            importance=event.importance,
            metadata=event.metadata,
        )

    def _edit(
        self,
        tenant: TenantId,
        memory: Memory,
        fields: Mapping[str, Any],
        reserved: Mapping[str, str | None],
    ) -> MemorySaved:
        """The event that saves `memory` again with `fields` and its store metadata changed."""
        record = MemoryRecord.model_validate({**self._scoping.record(memory), **fields})
        kept = {k: v for k, v in memory.metadata.items() if k in _KEPT}
        merged = {k: v for k, v in {**kept, **reserved}.items() if v is not None}
        return self._scoping.saved(
            record, tenant, self._embedding_model, edited=memory, reserved=merged
        )

    async def _placed(self, tenant: TenantId, ref: NamespaceRef | None) -> dict[str, str | None]:
        """The reserved metadata that places a memory in `ref` (none when no ref is sent)."""
        if ref is None:
            return {}
        return {PLACED: (await self.namespaces.placement(tenant, ref.namespace_id)).namespace_id}

    async def _answers(self, tenant: TenantId, memories: Sequence[Memory]) -> list[StoreMemory]:
        """The memories as the store answers them (the namespace each is placed in read once,
        and only when one is)."""
        hierarchy = None
        if any(PLACED in m.metadata for m in memories):
            hierarchy = await self.namespaces.hierarchy(tenant)
        return [self._answer(m, hierarchy) for m in memories]

    def _answer(self, memory: Memory, hierarchy: Hierarchy | None) -> StoreMemory:
        record = self._scoping.record(memory)
        meta = memory.metadata
        topics = meta.get(TOPICS)
        placed = hierarchy.placed(meta.get(PLACED)) if hierarchy is not None else None
        return StoreMemory(
            id=memory.id,
            text=memory.content,
            created_at=memory.timestamp,
            updated_at=memory.timestamp,
            memory_type=str(record["memory_type"]),
            session_id=memory.thread or None,
            owner_id=meta.get(_OWNER),
            namespace=meta.get(_LABEL),
            namespace_ref=placed,
            topics=None if topics is None else list(json.loads(topics)),
            attributes=_attributes(memory),
        )


def _reserved(
    owner: str | None, label: str | None, attributes: Mapping[str, Any] | None
) -> dict[str, str]:
    values = {
        _OWNER: owner,
        _LABEL: label,
        _ATTRIBUTES: None if attributes is None else json.dumps(dict(attributes)),
    }
    return {k: v for k, v in values.items() if v is not None}


def _attributes(memory: Memory) -> dict[str, Any] | None:
    raw = memory.metadata.get(_ATTRIBUTES)
    return None if raw is None else dict(json.loads(raw))


def _reason(exc: Exception) -> str:
    return str(exc).splitlines()[0][:300]


def _event(session_id: str, message: MemoryMessage, extras: MessageExtras | None) -> SessionEvent:
    role = {"user": MessageRole.USER, "system": MessageRole.SYSTEM}.get(
        message.role, MessageRole.ASSISTANT
    )
    parts = extras.parts if extras is not None else [message.content]
    return SessionEvent(
        event_id=message.id,
        actor_id=extras.actor_id if extras is not None else message.role,
        session_id=session_id,
        role=role,
        content=[TextPart(text=part) for part in parts],
        created_at=message.created_at,
        system_timestamp=extras.ingested_at if extras is not None else message.created_at,
        metadata=extras.metadata if extras is not None else None,
    )


# -- search filters ---------------------------------------------------------------------------


def _admits(check: ValueFilter, values: Sequence[str], fold: bool) -> bool:
    """Whether a field holding `values` (one, none, or a list's) passes `check`."""

    def norm(value: str) -> str:
        return value.lower() if fold else value

    held = {norm(v) for v in values}
    if check.eq is not None and norm(check.eq) not in held:
        return False
    if check.ne is not None and norm(check.ne) in held:
        return False
    if check.in_ is not None and not held & {norm(v) for v in check.in_}:
        return False
    return check.all is None or {norm(v) for v in check.all} <= held


def _in_time(check: TimeFilter, at: datetime) -> bool:
    return (
        (check.gt is None or at > check.gt)
        and (check.gte is None or at >= check.gte)
        and (check.lt is None or at < check.lt)
        and (check.lte is None or at <= check.lte)
        and (check.eq is None or at == check.eq)
    )


def _attribute_matches(clause: AttributeClause, value: object) -> bool:
    if clause.string is not None:
        return value == clause.string
    if clause.boolean is not None:
        return isinstance(value, bool) and value == clause.boolean
    if clause.number is not None:
        return (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and (float(value) == clause.number)
        )
    if clause.list_ is not None:
        return isinstance(value, list) and set(clause.list_) <= set(map(str, value))
    return False


def _attribute_check(name: str, clause: AttributeClause) -> Callable[[Memory], bool]:
    return lambda m: _attribute_matches(clause, (_attributes(m) or {}).get(name))


def _plan(
    tenant: TenantId,
    given: LongTermMemoryFilter | None,
    conjunction: FilterConjunction,
    record: Callable[[Memory], Mapping[str, object]],
) -> tuple[SearchFilter, Callable[[Memory], bool] | None]:
    """The index's filter and the check on candidates for a store search's filter."""
    if given is None:
        return SearchFilter(tenant=tenant), None

    def one(value: str | None) -> list[str]:
        return [] if value is None else [value]

    checks: list[Callable[[Memory], bool]] = []
    if given.session_id is not None:
        sessions = given.session_id
        checks.append(lambda m: _admits(sessions, one(m.thread or None), fold=False))
    if given.owner_id is not None:
        owners = given.owner_id
        checks.append(lambda m: _admits(owners, one(m.metadata.get(_OWNER)), fold=False))
    if given.namespace is not None:
        labels = given.namespace
        checks.append(lambda m: _admits(labels, one(m.metadata.get(_LABEL)), fold=True))
    if given.namespace_ref is not None:
        refs = given.namespace_ref
        checks.append(lambda m: _admits(refs, one(m.metadata.get(PLACED)), fold=False))
    if given.topics is not None:
        topics = given.topics
        checks.append(
            lambda m: _admits(topics, json.loads(m.metadata.get(TOPICS) or "[]"), fold=True)
        )
    if given.memory_type is not None:
        kinds = given.memory_type
        checks.append(lambda m: _admits(kinds, [str(record(m)["memory_type"])], fold=True))
    if given.created_at is not None:
        window = given.created_at
        checks.append(lambda m: _in_time(window, m.timestamp))
    for name, clause in (given.attributes or {}).items():
        checks.append(_attribute_check(name, clause))
    unplaced = given.unnamespaced
    if unplaced and (given.namespace is not None or given.namespace_ref is not None):
        raise InvalidInputError(
            "unnamespaced excludes the namespace filters: send one or the other"
        )
    if conjunction is FilterConjunction.ALL:
        passes = (lambda m: all(check(m) for check in checks)) if checks else None
    else:
        passes = (lambda m: any(check(m) for check in checks)) if checks else None
    if unplaced:
        inner = passes
        passes = lambda m: (  # noqa: E731
            _LABEL not in m.metadata and PLACED not in m.metadata and (inner is None or inner(m))
        )
    where = SearchFilter(tenant=tenant)
    if conjunction is FilterConjunction.ALL:
        where = _pushed(tenant, given)
    return where, passes


def _pushed(tenant: TenantId, given: LongTermMemoryFilter) -> SearchFilter:
    """What the index can filter of an all-of filter: sessions and time (the rest, and
    these again, are checked on the candidates)."""
    threads: tuple[str, ...] = ()
    sessions = given.session_id
    if sessions is not None and sessions.eq is not None:
        threads = (sessions.eq,)
    elif sessions is not None and sessions.in_:
        threads = tuple(sorted(set(sessions.in_)))
    since = until = None
    window = given.created_at
    if window is not None:
        since = window.gte or window.eq
        until = window.lte or window.eq
    return SearchFilter(
        tenant=tenant, threads=tuple(t for t in threads if t), since=since, until=until
    )
