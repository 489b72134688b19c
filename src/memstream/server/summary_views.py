"""agent-memory-server's summary views and tasks, as events in the log.

A view's definition and removal are events the projection applies as tenant documents
(memory.events.views); answered once applied, so the next read finds them. A run is a
SummaryRunRequested: the worker's summary job (streams.summaries) reads the view and the
tenant's memories, asks the chat model once a partition whose inputs changed, and writes each
result and the task's progress back to the log. A run of the whole view answers its task at
once (pending); a run of one partition answers once the job's result is applied.

Where a view's labels are kept: `session_id` is the thread, `memory_type` the coarse kind of
the memory's type, the tenant field (MEMSTREAM_SERVER_TENANT_FIELD) the tenant, and the other
scoping field the memory's `ams.` metadata, as server.mapping keeps them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from memstream.errors import InvalidInputError, SummaryViewNotFoundError, TaskNotFoundError
from memstream.memory.events import (
    TASKS,
    VIEWS,
    SummaryRunRequested,
    SummaryViewDefined,
    SummaryViewRemoved,
    results_of,
)
from memstream.memory.model import RESERVED_PREFIX
from memstream.memory.ports import EventRef
from memstream.memory.summaries import partition_key, result_key
from memstream.memory.tenancy import TenantId
from memstream.server.api_keys import Principal
from memstream.server.models import AckResponse, MemoryTypeEnum
from memstream.server.service import MemoryService
from memstream.server.summary_models import (
    GROUP_FIELDS,
    CreateSummaryViewRequest,
    RunSummaryViewRequest,
    SummaryView,
    SummaryViewPartitionResult,
    Task,
)

__all__ = ["TASK_KEPT", "SummaryViews"]

TASK_KEPT = timedelta(days=7)  # a task is found this long after it was created (AMS's TTL)
# How long one partition's run may take, model call included, before the request gives up
# (the result is still written, and listed with the view's partitions).
_PARTITION_WAIT_S = 120.0


class SummaryViews:
    def __init__(self, memory: MemoryService) -> None:
        self._memory = memory
        self.scoping = scoping = memory.scoping
        self._tenant_field = scoping.tenant_field
        self._facets = {
            scoping.tenant_field: "tenant",
            scoping.other_field: f"meta:{RESERVED_PREFIX}{scoping.other_field}",
            "session_id": "thread",
            "memory_type": "kind",
        }

    def _tenant(self, principal: Principal, *named: str | None) -> TenantId:
        return principal.tenant_for(named, self._tenant_field)

    async def create(
        self, principal: Principal, body: CreateSummaryViewRequest, named: str | None
    ) -> SummaryView:
        if body.source != "long_term":
            raise InvalidInputError(
                "SummaryView.source must be 'long_term' for now; 'working_memory' is not yet "
                "supported."
            )
        for what, labels in (("group_by", body.group_by), ("filter", body.filters)):
            unknown = sorted(set(labels) - set(GROUP_FIELDS))
            if unknown:
                raise InvalidInputError(
                    f"Unsupported {what} fields: {', '.join(unknown)} (a view groups and "
                    f"filters by {', '.join(GROUP_FIELDS)})"
                )
        filters = {k: str(v) for k, v in body.filters.items()}
        _check_types(filters)
        tenant = self._tenant(principal, named, filters.get(self._tenant_field))
        view = SummaryView(id=str(uuid.uuid4()), **body.model_dump())
        event = SummaryViewDefined(
            tenant=tenant,
            view_id=view.id,
            source=view.source,
            defined_at=datetime.now(UTC),
            name=view.name,
            group_by=tuple(view.group_by),
            filters=filters,
            facets={k: self._facets[k] for k in {*view.group_by, *filters}},
            time_window_days=view.time_window_days,
            continuous=view.continuous,
            prompt=view.prompt,
            model_name=view.model_name,
        )
        await self._memory.write([event], self._memory.limits.max_wait_s)
        return SummaryView.model_validate(event.document())

    async def views(self, principal: Principal, named: str | None) -> list[SummaryView]:
        stored = await self._memory.documents(self._tenant(principal, named), VIEWS)
        views = [SummaryView.model_validate_json(body) for body in stored.values()]
        return sorted(views, key=lambda v: v.id)

    async def view(self, principal: Principal, view_id: str, named: str | None) -> SummaryView:
        return SummaryView.model_validate(await self._view(self._tenant(principal, named), view_id))

    async def _view(self, tenant: TenantId, view_id: str) -> dict[str, Any]:
        stored = (await self._memory.documents(tenant, VIEWS)).get(view_id)
        if stored is None:
            raise SummaryViewNotFoundError(f"SummaryView {view_id} not found")
        view: dict[str, Any] = json.loads(stored)
        return view

    async def remove(self, principal: Principal, view_id: str, named: str | None) -> AckResponse:
        """Remove the view and its results; ok whether or not it was there (as AMS)."""
        tenant = self._tenant(principal, named)
        event = SummaryViewRemoved(tenant=tenant, view_id=view_id, removed_at=datetime.now(UTC))
        await self._memory.write([event], self._memory.limits.max_wait_s)
        return AckResponse(status="ok")

    async def run_partition(
        self, principal: Principal, view_id: str, group: Mapping[str, str], named: str | None
    ) -> SummaryViewPartitionResult:
        """Summarise one partition now: answered with its result once the worker wrote it."""
        tenant = self._tenant(principal, named, group.get(self._tenant_field))
        view = await self._view(tenant, view_id)
        expected = sorted(view["group_by"])
        if sorted(group) != expected:
            raise InvalidInputError(
                f"group keys {sorted(group)} must exactly match view.group_by {expected}"
            )
        _check_types(group)
        request = SummaryRunRequested(
            tenant=tenant,
            run_id=str(uuid.uuid4()),
            view_id=view_id,
            requested_at=datetime.now(UTC),
            whole=False,
            group=dict(group),
        )
        await self._memory.write([request], None)
        await self._memory.applied([EventRef(tenant, request.result_id(group))], _PARTITION_WAIT_S)
        results = await self._memory.documents(tenant, results_of(view_id))
        result = json.loads(results[result_key(group)])
        return SummaryViewPartitionResult.model_validate({**result, "group": dict(group)})

    async def partitions(
        self,
        principal: Principal,
        view_id: str,
        wanted: Mapping[str, str | None],
    ) -> list[SummaryViewPartitionResult]:
        """The view's stored results whose group has each value `wanted` names."""
        tenant = self._tenant(principal, wanted.get(self._tenant_field))
        await self._view(tenant, view_id)
        stored = await self._memory.documents(tenant, results_of(view_id))
        results = [SummaryViewPartitionResult.model_validate_json(b) for b in stored.values()]
        named = {k: v for k, v in wanted.items() if v is not None}
        return sorted(
            (r for r in results if all(r.group.get(k) == v for k, v in named.items())),
            key=lambda r: partition_key(r.group),
        )

    async def run(
        self, principal: Principal, view_id: str, body: RunSummaryViewRequest, named: str | None
    ) -> Task:
        """Start a run of every partition: answered with its task (pending) once recorded."""
        tenant = self._tenant(principal, named)
        await self._view(tenant, view_id)
        request = SummaryRunRequested(
            tenant=tenant,
            run_id=body.task_id or str(uuid.uuid4()),
            view_id=view_id,
            requested_at=datetime.now(UTC),
            force=body.force,
        )
        await self._memory.write([request], self._memory.limits.max_wait_s)
        return Task(id=request.run_id, view_id=view_id, created_at=request.requested_at)

    async def task(self, principal: Principal, task_id: str, named: str | None) -> Task:
        stored = (await self._memory.documents(self._tenant(principal, named), TASKS)).get(task_id)
        task = Task.model_validate_json(stored) if stored is not None else None
        if task is None or task.created_at < datetime.now(UTC) - TASK_KEPT:
            raise TaskNotFoundError(f"Task {task_id} not found")
        return task


def _check_types(values: Mapping[str, str]) -> None:
    kind = values.get("memory_type")
    if kind is not None and kind not in {t.value for t in MemoryTypeEnum}:
        known = ", ".join(t.value for t in MemoryTypeEnum)
        raise InvalidInputError(f"memory_type {kind!r} is not one of {known}")
