"""The consolidation job: turns a tenant's ConsolidationRequested events into summaries.

What does the job do?
    The worker's projection agent hands it every ConsolidationRequested it applied for the
    first time (a redelivery or a rebuild applies nothing new, so it never asks twice). The
    job gathers a tenant's requests in a window: the first request opens it, later ones merge
    into it (the latest cutoff, the smallest group size), and when it closes the job runs the
    memory manager once for the tenant — reading the projection, asking the model once per
    group, and writing one MemoriesConsolidated per group to the memory topic, keyed by the
    tenant. Each summary is decided here, once, and carried in its event: projecting it, now
    or in any replay, never calls a model again. The model calls are announced as a Usage
    event for the tenant and the thread that asked.

A request still in an open window when the worker stops is dropped (the log has it, the next
turn asks again); consolidation is an optimisation of memory, never a write of it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from memstream.errors import MemstreamError
from memstream.llm import ModelClient, ModelRequest, ModelResponse, Usage
from memstream.memory.consolidation import plan_consolidation
from memstream.memory.events import ConsolidationRequested, MemoriesConsolidated, TenantErased
from memstream.memory.monitoring import ModelUsage, Monitor
from memstream.memory.ports import AppliedOutcome, MemoryReader
from memstream.memory.store import MemoryFilter
from memstream.memory.tenancy import TenantId, validate_tenant

__all__ = ["ConsolidationJob", "ConsolidationWindow", "PendingConsolidation"]

log = logging.getLogger(__name__)

Send = Callable[[MemoriesConsolidated], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class PendingConsolidation:
    tenant: TenantId
    thread: str
    cutoff: datetime
    min_count: int
    due_at: float


class ConsolidationWindow:
    """Per-tenant windows, as pure time arithmetic on a monotonic clock reading."""

    def __init__(self, window_s: float) -> None:
        self._window_s = window_s
        self._open: dict[str, PendingConsolidation] = {}

    def add(self, request: ConsolidationRequested, now: float) -> None:
        pending = self._open.get(request.tenant)
        if pending is None:
            self._open[request.tenant] = PendingConsolidation(
                validate_tenant(request.tenant),
                request.thread,
                request.cutoff,
                request.min_count,
                now + self._window_s,
            )
            return
        self._open[request.tenant] = replace(
            pending,
            thread=request.thread,
            cutoff=max(pending.cutoff, request.cutoff),
            min_count=min(pending.min_count, request.min_count),
        )

    def due(self, now: float) -> list[PendingConsolidation]:
        """Remove and return the windows that have closed by `now`, earliest first."""
        closed = sorted((p for p in self._open.values() if p.due_at <= now), key=lambda p: p.due_at)
        for pending in closed:
            del self._open[pending.tenant]
        return closed

    def drop(self, tenant: str) -> None:
        """Close the tenant's window without consolidating (the tenant was erased)."""
        self._open.pop(tenant, None)

    def __len__(self) -> int:
        return len(self._open)


class _CountingClient:
    def __init__(self, client: ModelClient) -> None:
        self._client = client
        self.usage = Usage()

    def complete(self, request: ModelRequest) -> ModelResponse:
        response = self._client.complete(request)
        self.usage = self.usage + Usage(
            1, response.usage.input_tokens, response.usage.output_tokens
        )
        return response


class ConsolidationJob:
    def __init__(
        self,
        *,
        reader: MemoryReader,
        client: ModelClient,
        embedding_model: str,
        send: Send,
        monitor: Monitor,
        window_s: float = 5.0,
    ) -> None:
        self.window = ConsolidationWindow(window_s)
        self._reader = reader
        self._client = client
        self._embedding_model = embedding_model
        self._send = send
        self._monitor = monitor

    def observe(self, outcomes: Sequence[AppliedOutcome], now: float | None = None) -> None:
        """Open or extend windows for requests applied for the first time."""
        at = time.monotonic() if now is None else now
        for outcome in outcomes:
            if outcome.applied_now and isinstance(outcome.event, ConsolidationRequested):
                self.window.add(outcome.event, at)
            elif outcome.applied_now and isinstance(outcome.event, TenantErased):
                # Nothing of an erased tenant may be summarised into a new event afterwards.
                self.window.drop(outcome.event.tenant)

    async def run_due(self, now: float | None = None) -> list[MemoriesConsolidated]:
        written: list[MemoriesConsolidated] = []
        for pending in self.window.due(time.monotonic() if now is None else now):
            try:
                written += await self._consolidate(pending)
            except MemstreamError as exc:
                log.warning("consolidation of tenant %r skipped: %s", pending.tenant, exc)
        return written

    async def _consolidate(self, pending: PendingConsolidation) -> list[MemoriesConsolidated]:
        # Reading, planning and the model calls run in a thread; the events are sent from
        # this loop, where the producer lives.
        client = _CountingClient(self._client)
        planned = await asyncio.to_thread(
            lambda: plan_consolidation(
                self._reader.memories(pending.tenant, MemoryFilter(before=pending.cutoff)),
                client,
                min_count=pending.min_count,
                embedding_model=self._embedding_model,
            )
        )
        for event in planned:
            await self._send(event)
        if client.usage.calls:
            self._monitor.announce(
                ModelUsage(
                    tenant=pending.tenant,
                    thread=pending.thread,
                    purpose="consolidation",
                    calls=client.usage.calls,
                    input_tokens=client.usage.input_tokens,
                    output_tokens=client.usage.output_tokens,
                    at=datetime.now(UTC),
                )
            )
        log.info("consolidated %d groups of tenant %r", len(planned), pending.tenant)
        return planned
