"""The long-term memory operations the HTTP API and the MCP tools share, on AMS's wire models.

Every operation acts for one tenant, decided by `Principal.tenant_for` from the key and what
the request names, before anything is read or written. Writes go into the log as events
(`MemorySaved`, `MemoryForgotten`) and are answered once Kafka has acknowledged them: durable,
recallable a few milliseconds later. With `wait` (seconds) a write is answered only once the
live projection has applied it (read-your-writes), or fails with ProjectionLagError.

Reads come from the projection: filtered search (`projections.search`), one memory by id,
and the `semantic-memory` section the middleware would build (`memory.manager`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import anyio

from memstream.errors import (
    InvalidInputError,
    LimitExceededError,
    MemoryIdRetiredError,
    MemoryNotFoundError,
    ProjectionLagError,
)
from memstream.llm import ModelClient
from memstream.memory.compaction import (
    MAX_GROUP,
    NEAR_DISTANCE,
    exact_groups,
    merge_request,
    merged,
    merged_text,
)
from memstream.memory.events import (
    MemoriesConsolidated,
    MemoryEvent,
    MemoryForgotten,
    check_memory_id,
)
from memstream.memory.history import Diffed
from memstream.memory.manager import relevant_context
from memstream.memory.model import SUBJECT, Memory
from memstream.memory.moments import as_utc
from memstream.memory.monitoring import ModelUsage
from memstream.memory.ports import Identified, MemoryLookup, ProjectionProgress
from memstream.memory.provenance import provenance_json
from memstream.memory.search import MemorySearch, SearchFilter, SearchMode, SearchPage
from memstream.memory.shown import ShownTurn, turns_shown
from memstream.memory.tenancy import TenantId
from memstream.server.api_keys import Principal
from memstream.server.mapping import Scoping, recency_order
from memstream.server.models import (
    AckResponse,
    EditMemoryRecordRequest,
    ForgetRequest,
    ForgetResponse,
    MemoryHistory,
    MemoryPromptRequest,
    MemoryPromptResponse,
    MemoryRecord,
    MemoryRecordResult,
    MemoryRecordResults,
    MemoryTypeEnum,
    PromptMessage,
    SearchModeEnum,
    SearchRequest,
    StoredMemoryRecord,
    TagFilter,
    TextContent,
)
from memstream.server.sessions import SessionService
from memstream.server.tombstones import TombstoneChecks
from memstream.streams.event_publisher import EventPublisher
from memstream.streams.lineage import Lineage

__all__ = ["MAX_DELETE_IDS", "Limits", "MemoryService"]

MAX_DELETE_IDS = 1000
_PROMPT_K = 12  # as many memories as the middleware's recall (MemoryManagerConfig.recall_k)


@dataclass(frozen=True, slots=True)
class Limits:
    """The request limits, each named in the error its breach raises."""

    max_records: int = 100
    max_query_chars: int = 2_000
    max_wait_s: float = 30.0

    def records(self, count: int) -> None:
        if count > self.max_records:
            raise LimitExceededError(
                "max_records",
                f"the request carries {count} memories, more than the {self.max_records} one "
                "request may carry (MEMSTREAM_SERVER_MAX_RECORDS); send them in batches",
            )
        if count == 0:
            raise InvalidInputError("the request carries no memories; send at least one")

    def query(self, text: str | None, field: str) -> None:
        if text is not None and len(text) > self.max_query_chars:
            raise LimitExceededError(
                "max_query_chars",
                f"{field} has {len(text)} characters, more than {self.max_query_chars} "
                "(MEMSTREAM_SERVER_MAX_QUERY_CHARS); shorten it",
            )

    def wait(self, wait_s: float | None) -> None:
        if wait_s is not None and not 0 < wait_s <= self.max_wait_s:
            raise LimitExceededError(
                "max_wait_s",
                f"wait_timeout must be more than 0 and at most {self.max_wait_s:g} seconds "
                f"(MEMSTREAM_SERVER_MAX_WAIT_S); got {wait_s:g}",
            )


class MemoryService:
    def __init__(
        self,
        *,
        publisher: EventPublisher,
        search: MemorySearch,
        reader: MemoryLookup,
        tombstones: TombstoneChecks,
        status: ProjectionProgress,
        scoping: Scoping,
        limits: Limits,
        embedding_model: str,
        sessions: SessionService,
        lineage: Lineage | None = None,
        merger: ModelClient | None = None,
    ) -> None:
        self._publisher = publisher
        self._lineage = lineage
        self._merger = merger  # compaction's model for near-duplicates (None: exact only)
        self.sessions = sessions
        self._search = search
        self._reader = reader
        self._tombstones = tombstones
        self._status = status
        self.scoping = scoping
        self.limits = limits
        self.embedding_model = embedding_model

    # -- writes -------------------------------------------------------------------------------

    async def create(
        self, principal: Principal, records: Sequence[MemoryRecord], *, wait: float | None
    ) -> AckResponse:
        self.limits.records(len(records))
        self.limits.wait(wait)
        named = [self.scoping.tenant_named(record) for record in records]
        tenant = principal.tenant_for(named, self.scoping.tenant_field)
        events = [self.scoping.saved(r, tenant, self.embedding_model) for r in records]
        retired = await self._tombstones.forgotten(tenant, [event.memory_id for event in events])
        if retired:
            raise MemoryIdRetiredError(
                f"{len(retired)} memory id(s) of this request were deleted before "
                f"({', '.join(sorted(retired)[:5])}); a deleted id is never used again, so "
                "nothing was written: give those memories new ids"
            )
        await self.write(events, wait)
        return AckResponse(status="ok")

    async def edit(
        self,
        principal: Principal,
        memory_id: str,
        changes: EditMemoryRecordRequest,
        *,
        named: str | None,
        wait: float | None,
    ) -> MemoryRecord:
        """Change some fields of a stored memory: one MemorySaved of the whole new memory
        under the same id (its time stays; a pinned memory's importance follows `pinned`).
        A field sent as null stays as it is, as in AMS (a memory's type or text cannot be
        unset)."""
        self.limits.wait(wait)
        field = self.scoping.tenant_field
        updates = {k: v for k, v in changes.model_dump(exclude_unset=True).items() if v is not None}
        tenant = principal.tenant_for([named, updates.pop(field, None)], field)
        check_memory_id(memory_id)
        (memory,) = await anyio.to_thread.run_sync(self._reader.memories_by_id, tenant, [memory_id])
        if memory is None:
            raise MemoryNotFoundError(f"no memory with id {memory_id!r} in this tenant")
        current = self.scoping.record(memory)
        if "pinned" in updates and "importance" not in updates:
            current.pop("importance")
        record = MemoryRecord.model_validate({**current, **updates})
        await self.write(
            [self.scoping.saved(record, tenant, self.embedding_model, edited=memory)], wait
        )
        return record

    async def delete(
        self,
        principal: Principal,
        memory_ids: Sequence[str],
        *,
        named: str | None,
        wait: float | None,
    ) -> AckResponse:
        self.limits.wait(wait)
        tenant = principal.tenant_for([named], self.scoping.tenant_field)
        if not 1 <= len(memory_ids) <= MAX_DELETE_IDS:
            raise InvalidInputError(
                f"name 1 to {MAX_DELETE_IDS} memories to delete: memory_ids=ID (repeatable)"
            )
        for memory_id in memory_ids:
            check_memory_id(memory_id)
        present = await anyio.to_thread.run_sync(self._present, tenant, memory_ids)
        await self.write([_forget(tenant, memory_ids)], wait)
        return AckResponse(status=f"ok, deleted {present} memories")

    async def forget(
        self,
        principal: Principal,
        request: ForgetRequest,
        *,
        named: str | None,
        other: str | None,
        session_id: str | None,
        limit: int,
        dry_run: bool,
        wait: float | None,
    ) -> ForgetResponse:
        self.limits.wait(wait)
        tenant = principal.tenant_for([named], self.scoping.tenant_field)
        memories = await anyio.to_thread.run_sync(self._reader.memories, tenant)
        if session_id is not None:
            memories = [m for m in memories if m.thread == session_id]
        if other is not None:
            other_field = self.scoping.other_field
            memories = [m for m in memories if self.scoping.record(m)[other_field] == other]
        scanned = memories[:limit]
        chosen = _chosen(scanned, request, datetime.now(UTC), self.scoping)
        if chosen and not dry_run:
            await self.write([_forget(tenant, chosen)], wait)
        return ForgetResponse(
            scanned=len(scanned), deleted=len(chosen), deleted_ids=chosen, dry_run=dry_run
        )

    async def compact(
        self,
        principal: Principal,
        *,
        named: str | None,
        other: str | None,
        session_id: str | None,
        wait: float | None,
    ) -> AckResponse:
        """AMS's compaction, as events (memory.compaction): each group of exact duplicates
        (same text, type, session and user: AMS's memory hash) becomes one memory; with a
        chat model configured, each clique of near-duplicates among the rest too, merged by
        one model call. Each copy's history says what it was merged into."""
        self.limits.wait(wait)
        tenant = principal.tenant_for([named], self.scoping.tenant_field)
        memories = await anyio.to_thread.run_sync(self._reader.memories, tenant)
        # Each memory's AMS type and user, read once: the scope its duplicates share.
        scopes: dict[str, tuple[object, object]] = {}
        for memory in memories:
            record = self.scoping.record(memory)
            scopes[memory.id] = (record["memory_type"], record[self.scoping.other_field])
        scoped = [
            m
            for m in memories
            if (session_id is None or m.thread == session_id)
            and (other is None or scopes[m.id][1] == other)
        ]
        groups = exact_groups(scoped, lambda m: (m.content, m.thread, scopes[m.id]))
        events = [merged(g, g[0].content, self.embedding_model) for g in groups if len(g) > 1]
        if self._merger is not None:
            singles = [g[0] for g in groups if len(g) == 1]
            near = await anyio.to_thread.run_sync(
                self._near_groups, tenant, singles, session_id, lambda m: scopes[m.id]
            )
            events += await self._merge_near(tenant, near)
        if events:
            await self.write(events, wait)
        left = len(scoped) - sum(len(e.memory_ids) - 1 for e in events)
        return AckResponse(status=f"ok, {left} memories remaining after compaction")

    def _near_groups(
        self,
        tenant: TenantId,
        candidates: Sequence[Memory],
        session_id: str | None,
        scope: Callable[[Memory], object],
    ) -> list[list[Memory]]:
        """Cliques of near-duplicates among `candidates` (same type and user), newest first."""
        held = {m.id: m for m in candidates}
        where = SearchFilter(tenant=tenant, threads=(session_id,) if session_id else ())
        found: dict[str, set[str]] = {}  # each memory's neighbours, searched once

        def near(memory: Memory) -> set[str]:
            if memory.id not in found:
                page = self._search.search(
                    where,
                    memory.content,
                    mode=SearchMode.SEMANTIC,
                    limit=MAX_GROUP + 1,
                    max_distance=NEAR_DISTANCE,
                    keep=lambda m: m.id in held and scope(m) == scope(memory),
                )
                found[memory.id] = {hit.memory.id for hit in page.hits} - {memory.id}
            return found[memory.id]

        taken: set[str] = set()
        groups: list[list[Memory]] = []
        for memory in sorted(candidates, key=lambda m: (m.timestamp, m.id), reverse=True):
            if memory.id in taken:
                continue
            others = sorted(near(memory) - taken)[: MAX_GROUP - 1]
            group = {memory.id, *others}
            if others and all(group - {o} <= near(held[o]) | {o} for o in others):
                groups.append([held[i] for i in sorted(group)])
                taken |= group
        return groups

    async def _merge_near(
        self, tenant: TenantId, groups: Sequence[Sequence[Memory]]
    ) -> list[MemoriesConsolidated]:
        """One model call a group; a group the model answers nothing usable for stays."""
        merger = self._merger
        assert merger is not None
        events = []
        for group in groups:
            reply = await anyio.to_thread.run_sync(merger.complete, merge_request(group))
            usage = reply.usage
            await self._publisher.announce(
                ModelUsage(
                    tenant=tenant,
                    thread="",
                    purpose="compaction",
                    calls=max(usage.calls, 1),
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    at=datetime.now(UTC),
                )
            )
            text = merged_text(reply)
            if text is not None:
                events.append(merged(group, text, self.embedding_model))
        return events

    async def write(self, events: Sequence[MemoryEvent], wait: float | None) -> None:
        """Publish `events` (answered once acknowledged); with `wait`, once applied too."""
        await self._publisher.publish(events)
        if wait is not None:
            await self.applied(events, wait)

    async def applied(self, events: Sequence[Identified], wait: float) -> None:
        """Return once the live projection has applied `events` (those a worker writes too);
        ProjectionLagError after `wait` seconds."""
        # The projection's own wait (each tenant's last event polled), off the event loop.
        pending = await anyio.to_thread.run_sync(self._status.wait_applied, events, wait)
        if pending:
            raise ProjectionLagError(
                f"the events of {len(pending)} tenant(s) were durable in the log but not "
                f"applied within {wait:g}s; is a worker running? They will be applied; "
                "ask again shortly, or wait longer"
            )

    async def placed(self, tenant: TenantId, key: str, value: str) -> int:
        """How many of the tenant's memories hold `value` under metadata `key`."""
        memories = await anyio.to_thread.run_sync(self._reader.memories, tenant)
        return sum(1 for m in memories if m.metadata.get(key) == value)

    async def documents(self, tenant: TenantId, collection: str) -> dict[str, str]:
        """The tenant's documents of `collection` (key -> JSON): views, results, tasks."""
        found = await anyio.to_thread.run_sync(self._reader.documents, tenant, collection)
        return dict(found)

    async def retired(self, tenant: TenantId, memory_ids: Sequence[str]) -> set[str]:
        """Which of `memory_ids` were deleted before (a deleted id is never used again)."""
        return set(await self._tombstones.forgotten(tenant, memory_ids))

    async def lookup(self, tenant: TenantId, memory_ids: Sequence[str]) -> list[Memory | None]:
        """The tenant's memories of `memory_ids`, in order (None: not held)."""
        found = await anyio.to_thread.run_sync(self._reader.memories_by_id, tenant, memory_ids)
        return list(found)

    def find(
        self,
        where: SearchFilter,
        text: str,
        *,
        mode: SearchMode,
        limit: int,
        offset: int,
        max_distance: float | None = None,
        keep: Callable[[Memory], bool] | None = None,
    ) -> SearchPage:
        """One page of a search already scoped to its tenant (`where`), ranked as every search."""
        self.limits.query(text, "text")
        return self._search.search(
            where, text, mode=mode, limit=limit, offset=offset, max_distance=max_distance, keep=keep
        )

    def _present(self, tenant: TenantId, memory_ids: Sequence[str]) -> int:
        return sum(m is not None for m in self._reader.memories_by_id(tenant, memory_ids))

    # -- reads --------------------------------------------------------------------------------

    def get(self, principal: Principal, memory_id: str, *, named: str | None) -> StoredMemoryRecord:
        tenant = principal.tenant_for([named], self.scoping.tenant_field)
        check_memory_id(memory_id)
        (memory,) = self._reader.memories_by_id(tenant, [memory_id])
        if memory is None:
            raise MemoryNotFoundError(f"no memory with id {memory_id!r} in this tenant")
        return StoredMemoryRecord.model_validate(_stored(self.scoping, memory))

    def search(self, principal: Principal, request: SearchRequest) -> MemoryRecordResults:
        if request.as_of is not None:
            return self._results(self._as_of(principal, request, request.as_of), request)
        return self._results(self._page(principal, request), request)

    def history(self, principal: Principal, memory_id: str, *, named: str | None) -> MemoryHistory:
        """Every event of the tenant's log that touched `memory_id` (404: never had it)."""
        tenant = principal.tenant_for([named], self.scoping.tenant_field)
        check_memory_id(memory_id)
        touches = self._past().history(tenant, memory_id)
        return MemoryHistory.model_validate(
            {"id": memory_id, "history": [t.as_json() for t in touches]}
        )

    def view(self, tenant: TenantId, at: datetime) -> list[Memory]:
        """The tenant's memory as it stood at `at`, from its log (the console's time view)."""
        return self._past().view(tenant, as_utc(at))

    def changes(self, tenant: TenantId, start: datetime, end: datetime) -> list[Diffed]:
        """What changed in the tenant's memory between `start` and `end`, from its log."""
        return self._past().diff(tenant, as_utc(start), as_utc(end))

    def turns(self, tenant: TenantId, run: str, turn: int | None) -> list[ShownTurn]:
        """What each turn of `run` (only `turn`, if given) was shown, from the tenant's log."""
        return turns_shown(self._past().log(tenant).events, run, turn)

    def _as_of(self, principal: Principal, request: SearchRequest, at: datetime) -> SearchPage:
        self.limits.query(request.text, "text")
        field = self.scoping.tenant_field
        named, excluded = self.scoping.tenants_filtered(getattr(request, field))
        tenant = principal.tenant_for(named, field)
        given = sorted(
            name for name in _FILTERS if name != field and getattr(request, name) is not None
        )
        if given or request.search_mode != SearchModeEnum.HYBRID or not request.text:
            dropped = f" (drop {', '.join(given)})" if given else ""
            raise InvalidInputError(
                "as_of searches the tenant's whole memory as it stood then: give `text`, the "
                f"hybrid mode and no filters{dropped}"
            )
        if tenant in excluded:
            return SearchPage((), 0)
        at = as_utc(at)
        end = request.offset + request.limit
        hits = self._past().recall(tenant, request.text, at=at, k=end)
        more = end + 1 if len(hits) == end else len(hits)  # a next page may be there
        return SearchPage(tuple(hits[request.offset :]), more)

    def _past(self) -> Lineage:
        if self._lineage is None:
            raise InvalidInputError("this server reads no log: as_of and history are off")
        return self._lineage

    async def prompt(
        self, principal: Principal, request: MemoryPromptRequest
    ) -> MemoryPromptResponse:
        """The `semantic-memory` section the middleware would show for `query` (the same
        selection and layout, within `max_recall_tokens`), as AMS's prompt messages; with a
        session, its summary and recent messages come first (server.sessions)."""
        self.limits.query(request.query, "query")
        if request.long_term_search is False:
            return await self._session_prompt(principal, request)
        if isinstance(request.long_term_search, SearchRequest):
            search = request.long_term_search.model_copy(update={"text": request.query})
        elif request.session is not None and request.session.session_id:
            # As AMS: the session's own messages are in the prompt already.
            search = SearchRequest(
                text=request.query,
                limit=_PROMPT_K,
                session_id=TagFilter(ne=request.session.session_id),
            )
        else:
            # AMS's `true` (or no search at all) recalls as the middleware does, tenant-wide.
            search = SearchRequest(text=request.query, limit=_PROMPT_K)
        field = self.scoping.tenant_field
        session_tenant = getattr(request.session, field) if request.session else None
        if session_tenant is not None and getattr(search, field) is None:
            search = search.model_copy(update={field: TagFilter(eq=session_tenant)})
        page = await anyio.to_thread.run_sync(self._page, principal, search)
        section = relevant_context(page.hits, request.max_recall_tokens * 4)
        text = section or "No relevant long-term memories found."
        session = (
            await self.sessions.prompt_messages(principal, request.session)
            if request.session
            else []
        )
        messages = [
            *session,
            PromptMessage(role="system", content=TextContent(text=f"## semantic-memory\n{text}")),
            PromptMessage(role="user", content=TextContent(text=request.query)),
        ]
        found = self._results(page, search).memories
        return MemoryPromptResponse(messages=messages, long_term_memories=found or None)

    async def _session_prompt(
        self, principal: Principal, request: MemoryPromptRequest
    ) -> MemoryPromptResponse:
        """AMS's session-only prompt (`long_term_search: false`): the session's summary and
        messages, then the query; no long-term memory."""
        if request.session is None:
            raise InvalidInputError(
                "long_term_search is false and no session is given, so the prompt would hold "
                "nothing but the query: give a session, or a long-term search"
            )
        session = await self.sessions.prompt_messages(principal, request.session)
        query = PromptMessage(role="user", content=TextContent(text=request.query))
        return MemoryPromptResponse(messages=[*session, query], long_term_memories=None)

    def _page(self, principal: Principal, request: SearchRequest) -> SearchPage:
        self.limits.query(request.text, "text")
        field = self.scoping.tenant_field
        named, excluded = self.scoping.tenants_filtered(getattr(request, field))
        tenant = principal.tenant_for(named, field)
        plan = self.scoping.plan(tenant, request)
        if plan.impossible or tenant in excluded:
            return SearchPage((), 0)
        return self._search.search(
            plan.where,
            request.text or "",
            mode=SearchMode(request.search_mode.value),
            limit=request.limit,
            offset=request.offset,
            max_distance=request.distance_threshold,
            keep=plan.keep,
            vector_weight=plan.vector_weight,
            scorer=plan.scorer,
        )

    def _results(self, page: SearchPage, request: SearchRequest) -> MemoryRecordResults:
        hits = recency_order(request, page.hits, datetime.now(UTC))
        results = [
            MemoryRecordResult.model_validate(
                {
                    **_stored(self.scoping, hit.memory),
                    "dist": 1.0 - hit.score,
                    "score": hit.score,
                    "score_type": request.search_mode,
                    "subject": hit.memory.metadata.get(SUBJECT),
                    "valid_to": hit.valid_to,
                }
            )
            for hit in hits
        ]
        end = request.offset + request.limit
        return MemoryRecordResults(
            memories=results, total=page.total, next_offset=end if end < page.total else None
        )


def _stored(scoping: Scoping, memory: Memory) -> dict[str, object]:
    """A stored memory's record fields with where it came from."""
    return {**scoping.record(memory), "provenance": provenance_json(memory.provenance)}


# The search's filters (the tenant's field aside): an as-of search takes none of them.
_FILTERS = (
    "session_id", "namespace", "topics", "entities", "created_at", "last_accessed", "user_id",
    "distance_threshold", "memory_type", "extraction_strategy", "event_date",
)  # fmt: skip


def _forget(tenant: str, memory_ids: Sequence[str]) -> MemoryForgotten:
    return MemoryForgotten(
        tenant=tenant,
        request_id=uuid.uuid4().hex,
        requested_at=datetime.now(UTC),
        memory_ids=tuple(memory_ids),
    )


def _chosen(
    memories: Sequence[Memory], request: ForgetRequest, now: datetime, scoping: Scoping
) -> list[str]:
    """The ids a forget policy selects (AMS's rules, on memstream's timestamps): past the age
    limit, or beyond the newest `budget`; pinned ones and `pinned_ids` never."""
    policy = request.policy
    pinned = set(request.pinned_ids or ())
    allow = set(policy.memory_type_allowlist or MemoryTypeEnum)
    eligible = [
        m
        for m in memories
        if m.id not in pinned
        and not scoping.record(m)["pinned"]
        and scoping.record(m)["memory_type"] in allow
    ]
    ages = [d for d in (policy.max_age_days, policy.max_inactive_days) if d is not None]
    chosen: set[str] = set()
    if ages:
        cutoff = now - timedelta(days=min(ages))
        chosen.update(m.id for m in eligible if m.timestamp < cutoff)
    if policy.budget is not None:
        kept = [m for m in eligible if m.id not in chosen]
        newest_first = sorted(kept, key=lambda m: (m.timestamp, m.id), reverse=True)
        chosen.update(m.id for m in newest_first[policy.budget :])
    return sorted(chosen)
