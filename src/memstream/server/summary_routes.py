"""agent-memory-server's summary-view and task routes, as one `APIRouter` of thin handlers over
`SummaryViews` (server/summary_views.py). A tenant key acts for its tenant; an admin key names
the tenant with `namespace` or `user_id` (MEMSTREAM_SERVER_TENANT_FIELD), as on every route."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from memstream.server.models import AckResponse
from memstream.server.routes import Caller, PathId, Tenant
from memstream.server.summary_models import (
    CreateSummaryViewRequest,
    RunSummaryViewPartitionRequest,
    RunSummaryViewRequest,
    SummaryView,
    SummaryViewPartitionResult,
    Task,
)
from memstream.server.summary_views import SummaryViews

__all__ = ["summary_views"]


async def _views(request: Request) -> SummaryViews:
    opened: SummaryViews = request.app.state.summary_views
    return opened


Views = Annotated[SummaryViews, Depends(_views)]

summary_views = APIRouter(tags=["summary views"])


@summary_views.post("/v1/summary-views", response_model=SummaryView)
async def create_summary_view(
    body: CreateSummaryViewRequest,
    views: Views,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
) -> SummaryView:
    """Define a view (a SummaryViewDefined event), answered once applied."""
    return await views.create(caller, body, views.scoping.named(namespace, user_id))


@summary_views.get("/v1/summary-views", response_model=list[SummaryView])
async def list_summary_views(
    views: Views, caller: Caller, namespace: Tenant = None, user_id: Tenant = None
) -> list[SummaryView]:
    return await views.views(caller, views.scoping.named(namespace, user_id))


@summary_views.get("/v1/summary-views/{view_id}", response_model=SummaryView)
async def get_summary_view(
    view_id: PathId,
    views: Views,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
) -> SummaryView:
    return await views.view(caller, view_id, views.scoping.named(namespace, user_id))


@summary_views.delete("/v1/summary-views/{view_id}", response_model=AckResponse)
async def delete_summary_view(
    view_id: PathId,
    views: Views,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
) -> AckResponse:
    """Remove the view and its results (a SummaryViewRemoved event); ok even if it was not
    there."""
    return await views.remove(caller, view_id, views.scoping.named(namespace, user_id))


@summary_views.post(
    "/v1/summary-views/{view_id}/partitions/run", response_model=SummaryViewPartitionResult
)
async def run_summary_view_partition(
    view_id: PathId,
    body: RunSummaryViewPartitionRequest,
    views: Views,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
) -> SummaryViewPartitionResult:
    """Summarise one partition (its values in `group`), answered with the result."""
    return await views.run_partition(
        caller, view_id, body.group, views.scoping.named(namespace, user_id)
    )


@summary_views.get(
    "/v1/summary-views/{view_id}/partitions", response_model=list[SummaryViewPartitionResult]
)
async def list_summary_view_partitions(
    view_id: PathId,
    views: Views,
    caller: Caller,
    namespace: str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
    memory_type: str | None = None,
) -> list[SummaryViewPartitionResult]:
    """The stored results, those whose group has each value given."""
    wanted = {
        "namespace": namespace,
        "user_id": user_id,
        "session_id": session_id,
        "memory_type": memory_type,
    }
    return await views.partitions(caller, view_id, wanted)


@summary_views.post("/v1/summary-views/{view_id}/run", response_model=Task)
async def run_summary_view(
    view_id: PathId,
    body: RunSummaryViewRequest,
    views: Views,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
) -> Task:
    """Summarise every partition in the worker: answered at once with the task (pending)."""
    return await views.run(caller, view_id, body, views.scoping.named(namespace, user_id))


@summary_views.get("/v1/tasks/{task_id}", response_model=Task)
async def get_task(
    task_id: PathId,
    views: Views,
    caller: Caller,
    namespace: Tenant = None,
    user_id: Tenant = None,
) -> Task:
    return await views.task(caller, task_id, views.scoping.named(namespace, user_id))
