"""SemanticMemoryMiddleware: long-term memory shared by every thread of a tenant.

    before_agent   resolve the tenant's store (refuse the input if that fails), recall what
                   is relevant to the input within max_recall_tokens * 4 characters, and
                   keep it under RecalledKey
    prompt_section show the recalled text to every model step of the turn as `semantic-memory`
    after_agent    record the turn (query and answer, each cut to max_record_chars) as one
                   journaled effect, `memory.record`; then, when `consolidate` is set, ask for
                   the memories older than `older_than` to be consolidated (a
                   ConsolidationRequested event, answered by the consolidation job, whose
                   summaries are one `memory.consolidate` effect per replaced group). With a
                   `recorder` (hooks.recorder) the turn only queues this for its thread.

A failed recall is skipped and announced (a Skipped event), and the turn goes on without
memory. Anything that fails after the answer is skipped and announced too: the answer is never
retracted because memory could not be written.

Register it outside guardrails (before them, or with runs_before={"guardrails"}): after_agent
runs in reverse stack order and a guardrail's block stops the rest, so a blocked answer is
never recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import ClassVar, Protocol, TypeVar

from memstream.agent.context import Clock, RunContext, SystemClock
from memstream.agent.middleware import AgentMiddleware, Block, Proceed, Turn
from memstream.errors import (
    ConfigurationError,
    InfrastructureError,
    KafkaUnavailableError,
    MemstreamError,
)
from memstream.hooks.recorder import TurnRecorder
from memstream.hooks.tenants import StoreResolver, TenantCell, TenantCells
from memstream.hooks.turns import (
    RecallConfig,
    RecordConfig,
    Stage,
    recall_context,
    skipped,
)
from memstream.hooks.view import EffectView
from memstream.llm import ModelClient, PromptSection
from memstream.memory.events import ConsolidationRequested
from memstream.memory.manager import LLMMemoryManager, MemoryManagerConfig
from memstream.memory.monitoring import LoggingMonitor, Monitor
from memstream.memory.store import MemoryStore

__all__ = ["ConsolidateConfig", "HookTimer", "ManagerFactory", "SemanticMemoryMiddleware"]

T = TypeVar("T")
# How long `with_store` waits for the recorder to write the turns that ended before it.
_SETTLE_S = 30.0
ManagerFactory = Callable[[MemoryStore, ModelClient], LLMMemoryManager]


@dataclass(frozen=True, slots=True)
class ConsolidateConfig:
    """Consolidate memories recorded more than `older_than` before the turn, in groups of at
    least `min_count`."""

    older_than: timedelta
    min_count: int = 3


class HookTimer(Protocol):
    def observe_hook(self, hook: str, seconds: float) -> None:
        """`hook` ("before_agent", "after_agent") took `seconds` (metrics)."""
        ...


def default_manager(store: MemoryStore, client: ModelClient) -> LLMMemoryManager:
    return LLMMemoryManager(MemoryManagerConfig(), store, client)


class SemanticMemoryMiddleware(AgentMiddleware):
    RecalledKey: ClassVar[str] = "semantic_memory.recalled"
    SECTION: ClassVar[str] = "semantic-memory"

    def __init__(
        self,
        *,
        stores: StoreResolver,
        client: ModelClient,
        manager: ManagerFactory = default_manager,
        recall: RecallConfig | None = None,
        record: RecordConfig | None = None,
        consolidate: ConsolidateConfig | None = None,
        clock: Clock | None = None,
        monitor: Monitor | None = None,
        timer: HookTimer | None = None,
        recorder: TurnRecorder | None = None,
        id: str = "semantic-memory",
        runs_before: frozenset[str] = frozenset(),
    ) -> None:
        if recall is None and record is None and consolidate is None:
            raise ConfigurationError(
                "this memory middleware has neither recall nor record, so it would do nothing; "
                "give recall=RecallConfig() to show memories to the model, "
                "record=RecordConfig() to remember turns, or both"
            )
        self.id = id
        self.runs_before = runs_before
        self.writes = frozenset({self.RecalledKey})
        self._cells = TenantCells(stores)
        self._client = client
        self._manager = manager
        self._recall = recall
        self._record = record
        self._consolidate = consolidate
        self._clock = clock or SystemClock()
        self._monitor = monitor or LoggingMonitor()
        self._timer = timer
        self._recorder = recorder

    def with_store(self, tenant: str, f: Callable[[MemoryStore | None], T]) -> T:
        """`f` on the tenant's store as the middleware's last write left it, under the
        tenant's lock (resolving the store if no run of the tenant has yet): turns still
        with the recorder are written first."""
        if self._recorder is not None and not self._recorder.flush(_SETTLE_S):
            raise KafkaUnavailableError(
                f"the turns this middleware ended are still not written after {_SETTLE_S:.0f} s "
                "(the journal's Redis or the broker is not keeping up: `memstream status`)"
            )
        return self._cells.with_store(tenant, f)

    # -- hooks ------------------------------------------------------------------------------

    def before_agent(self, input: str, context: RunContext) -> Proceed | Block:
        started = time.perf_counter()
        try:
            return self._before_agent(input, context)
        finally:
            if self._timer is not None:
                self._timer.observe_hook("before_agent", time.perf_counter() - started)

    def _before_agent(self, input: str, context: RunContext) -> Proceed | Block:
        tenant = context.config.tenant_id
        if tenant is None:
            return Proceed()
        try:
            cell = self._cells.cell(tenant)
        except Exception as exc:  # noqa: BLE001 - any resolution failure refuses the input
            return Block(
                f"the memory store of tenant {tenant!r} could not be resolved ({exc}); "
                "the input was refused before any model call. Fix the store configuration, "
                "or run without a tenant id to run without memory."
            )
        if cell.store is None:
            return Proceed()
        if self._consolidate is not None and not cell.store.transactional:
            return Block(
                f"consolidation needs a transactional memory store, and the store of tenant "
                f"{tenant!r} is not one; the input was refused before any model call. Use the "
                "event-sourced store, or turn consolidation off."
            )
        if self._recall is None:
            return Proceed()
        try:
            recalled = recall_context(self._manager_for(cell, context), input, self._recall)
        except InfrastructureError as exc:
            self._skipped(context, "recall", exc)
            return Proceed(update={self.RecalledKey: ""})
        return Proceed(update={self.RecalledKey: recalled})

    def prompt_section(self, context: RunContext) -> PromptSection | None:
        recalled = context.state.get(self.RecalledKey)
        if not recalled or self._recall is None:
            return None
        return PromptSection(self.SECTION, recalled)  # cut to the budget by the recall

    def after_agent(self, turn: Turn, context: RunContext) -> Proceed | Block:
        # Timed without a context manager: its generator frames would be most of the span.
        started = time.perf_counter()
        try:
            return self._after_agent(turn, context)
        finally:
            if self._timer is not None:
                self._timer.observe_hook("after_agent", time.perf_counter() - started)

    def _after_agent(self, turn: Turn, context: RunContext) -> Proceed | Block:
        if context.config.tenant_id is None or self._record is None:
            return Proceed()
        at = self._clock.now()
        if self._recorder is None:
            self._record_turn(turn, context, at)
            return Proceed()
        try:
            self._recorder.submit(partial(self._record_turn, turn, context, at))
        except MemstreamError as exc:
            self._skipped(context, "record", exc)
        return Proceed()

    def _record_turn(self, turn: Turn, context: RunContext, at: datetime) -> None:
        """Record the turn that ended `at` (on the recorder's thread when there is one)."""
        assert context.config.tenant_id is not None and self._record is not None
        try:
            cell = self._cells.cell(context.config.tenant_id)
            if cell.store is None:
                return
            manager = self._manager_for(cell, context)
            manager.record_turn(
                thread=context.config.thread_id,
                run=context.run_id,
                turn=context.turn_index,
                query=turn.input,
                answer=turn.answer,
                at=at,
                max_chars=self._record.max_record_chars,
            )
        except MemstreamError as exc:
            self._skipped(context, "record", exc)
            return
        if self._consolidate is not None:
            self._request_consolidation(manager, context)

    def _request_consolidation(self, manager: LLMMemoryManager, context: RunContext) -> None:
        # The summaries are written by the consolidation job (streams.consolidation), which
        # gathers a tenant's requests in a window: a turn never waits for a model to summarise.
        assert self._consolidate is not None
        now = self._clock.now()
        try:
            manager.store.write(
                ConsolidationRequested(
                    tenant=manager.store.tenant,
                    thread=context.config.thread_id,
                    run=context.run_id,
                    turn=context.turn_index,
                    cutoff=now - self._consolidate.older_than,
                    min_count=self._consolidate.min_count,
                    requested_at=now,
                )
            )
        except MemstreamError as exc:
            self._skipped(context, "consolidate", exc)

    # -- helpers ----------------------------------------------------------------------------

    def _manager_for(self, cell: TenantCell, context: RunContext) -> LLMMemoryManager:
        assert cell.store is not None
        view = EffectView(cell.store, cell, context)
        return self._manager(view, context.accounted(self._client))

    def _skipped(self, context: RunContext, stage: Stage, exc: MemstreamError) -> None:
        self._monitor.announce(
            skipped(
                tenant=context.config.tenant_id or "",
                thread=context.config.thread_id,
                run_id=context.run_id,
                stage=stage,
                error=exc,
                at=self._clock.now(),
            )
        )
