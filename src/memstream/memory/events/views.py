"""Summary views: a view defined (`SummaryViewDefined`) or removed (`SummaryViewRemoved`), a
run asked for (`SummaryRunRequested`), a partition's summary decided once by the summary job
(`PartitionSummarised`), and a run's task moving on (`SummaryTaskChanged`).

None of them writes memories: each applies as tenant documents (`Applies.DOCUMENT`) — the
view, its partitions' results, the task — which the API reads, a replay rebuilds from the log
without asking a model again, and an erasure deletes with the tenant's memories.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from memstream.errors import InvalidInputError
from memstream.memory.events.base import (
    Applies,
    DocumentChange,
    EventType,
    check_time,
    derive_id,
    writes_nothing,
)
from memstream.memory.events.recorded import check_memory_id
from memstream.memory.summaries import ViewSpec, partition_key, result_key, spec_json
from memstream.memory.tenancy import validate_tenant

VIEWS = "summary_views"
TASKS = "tasks"
TASK_STATUSES = ("pending", "running", "success", "failed")


def results_of(view_id: str) -> str:
    """The collection of a view's partition results (keyed by partition key)."""
    return f"partitions.{view_id}"


def _time(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


@dataclass(frozen=True, slots=True)
class SummaryViewDefined:
    """A tenant defined a summary view under a new id (the API's): what it covers and how its
    partitions are summarised (memory.summaries.ViewSpec), and where a memory keeps each
    label it names (`facets`, decided by the API that defined it)."""

    type: ClassVar[str] = "SummaryViewDefined"
    version: ClassVar[int] = 1

    tenant: str
    view_id: str
    source: str
    defined_at: datetime
    name: str | None = None
    group_by: tuple[str, ...] = ()
    filters: Mapping[str, str] = field(default_factory=dict)
    facets: Mapping[str, str] = field(default_factory=dict)
    time_window_days: int | None = None
    continuous: bool = False
    prompt: str | None = None
    model_name: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_memory_id(self.view_id)
        check_time(self.defined_at)
        if self.time_window_days is not None and self.time_window_days < 1:
            raise InvalidInputError("a view's time window is at least one day")
        try:
            self.spec  # noqa: B018  # its labels all placed, its facets all known
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from None

    @property
    def id(self) -> str:
        return derive_id("summary-view.define", self.tenant, self.view_id)

    @property
    def spec(self) -> ViewSpec:
        return ViewSpec(
            view_id=self.view_id,
            group_by=self.group_by,
            filters=self.filters,
            facets=self.facets,
            window_days=self.time_window_days,
            prompt=self.prompt,
            model_name=self.model_name,
        )

    def document(self) -> dict[str, Any]:
        return {
            **spec_json(self.spec),
            "name": self.name,
            "source": self.source,
            "continuous": self.continuous,
            "defined_at": self.defined_at.isoformat(),
        }


SUMMARY_VIEW_DEFINED = EventType(
    SummaryViewDefined,
    effect="summary-view.define",
    applies=Applies.DOCUMENT,
    memories=writes_nothing,
    sealed=("prompt",),
    documents=lambda e: (DocumentChange(VIEWS, e.view_id, json.dumps(e.document())),),
)


@dataclass(frozen=True, slots=True)
class SummaryViewRemoved:
    """A tenant removed a summary view: the view and its partitions' results go."""

    type: ClassVar[str] = "SummaryViewRemoved"
    version: ClassVar[int] = 1

    tenant: str
    view_id: str
    removed_at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_memory_id(self.view_id)
        check_time(self.removed_at)

    @property
    def id(self) -> str:
        return derive_id("summary-view.remove", self.tenant, self.view_id)


SUMMARY_VIEW_REMOVED = EventType(
    SummaryViewRemoved,
    effect="summary-view.remove",
    applies=Applies.DOCUMENT,
    memories=writes_nothing,
    documents=lambda e: (
        DocumentChange(VIEWS, e.view_id),
        DocumentChange(results_of(e.view_id), ""),
    ),
)


@dataclass(frozen=True, slots=True)
class SummaryRunRequested:
    """A tenant asked for a view's partitions to be summarised: all of them, as a task whose
    id is `run_id` (`whole`; a continuous view's refresh keeps no task: `tracked` false), or
    the one partition of `group`, answered at once. `force`: summarise again even where the
    stored summary's inputs did not change."""

    type: ClassVar[str] = "SummaryRunRequested"
    version: ClassVar[int] = 1

    tenant: str
    run_id: str
    view_id: str
    requested_at: datetime
    whole: bool = True
    group: Mapping[str, str] = field(default_factory=dict)
    force: bool = False
    tracked: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_memory_id(self.run_id)
        check_memory_id(self.view_id)
        check_time(self.requested_at)
        if self.whole and self.group:
            raise InvalidInputError("a run of the whole view names no group")

    @property
    def id(self) -> str:
        # A task id may be sent again (the run starts over, as AMS's does): its time tells
        # the requests apart.
        return derive_id("summary-view.run", self.tenant, self.run_id, _time(self.requested_at))

    def result_id(self, group: Mapping[str, str]) -> str:
        """The id of the PartitionSummarised this run writes for `group`."""
        return derive_id("summary-view.partition", self.tenant, self.id, partition_key(group))

    def task(self) -> SummaryTaskChanged | None:
        """The task a whole run starts as (pending); None for one partition or a refresh."""
        if not self.whole or not self.tracked:
            return None
        return SummaryTaskChanged(
            tenant=self.tenant,
            task_id=self.run_id,
            run=self.id,
            view_id=self.view_id,
            status="pending",
            created_at=self.requested_at,
        )


def _pending(event: SummaryRunRequested) -> tuple[DocumentChange, ...]:
    task = event.task()
    return _task_document(task) if task is not None else ()


SUMMARY_RUN_REQUESTED = EventType(
    SummaryRunRequested,
    effect="summary-view.run",
    applies=Applies.DOCUMENT,
    memories=writes_nothing,
    documents=_pending,
)


@dataclass(frozen=True, slots=True)
class SummaryTaskChanged:
    """A whole run's task moved on: pending -> running -> success | failed. `run` is the id
    of the request it runs for."""

    type: ClassVar[str] = "SummaryTaskChanged"
    version: ClassVar[int] = 1

    tenant: str
    task_id: str
    run: str
    view_id: str
    status: str
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    error_message: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_memory_id(self.task_id)
        check_time(self.created_at)
        if self.status not in TASK_STATUSES:
            raise InvalidInputError(
                f"a task's status is one of {', '.join(TASK_STATUSES)}, not {self.status!r}"
            )

    @property
    def id(self) -> str:
        return derive_id("summary-view.task", self.tenant, self.run, self.status)

    def document(self) -> dict[str, Any]:
        """The task as agent-memory-server's `Task` reads."""
        return {
            "id": self.task_id,
            "type": "summary_view_full_run",
            "status": self.status,
            "view_id": self.view_id,
            "created_at": self.created_at.isoformat(),
            "started_at": _time(self.started_at),
            "completed_at": _time(self.completed_at),
            "error_message": self.error_message,
        }


def _task_document(event: SummaryTaskChanged) -> tuple[DocumentChange, ...]:
    return (DocumentChange(TASKS, event.task_id, json.dumps(event.document())),)


SUMMARY_TASK_CHANGED = EventType(
    SummaryTaskChanged,
    effect="summary-view.task",
    applies=Applies.DOCUMENT,
    memories=writes_nothing,
    sealed=("error_message",),
    documents=_task_document,
)


@dataclass(frozen=True, slots=True)
class PartitionSummarised:
    """The summary job summarised one partition of a view for a run: decided once (the model
    is asked at most once a run and partition) and carried here, with the digest of its
    inputs (memory.summaries.inputs_digest: "" where it failed and must be asked again)."""

    type: ClassVar[str] = "PartitionSummarised"
    version: ClassVar[int] = 1

    tenant: str
    view_id: str
    run: str
    group: Mapping[str, str]
    summary: str
    memory_count: int
    inputs: str
    model: str
    computed_at: datetime
    input_tokens: int = 0
    output_tokens: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_memory_id(self.view_id)
        check_time(self.computed_at)

    @property
    def id(self) -> str:
        return derive_id("summary-view.partition", self.tenant, self.run, partition_key(self.group))

    def document(self) -> dict[str, Any]:
        return {
            "view_id": self.view_id,
            "group": dict(self.group),
            "summary": self.summary,
            "memory_count": self.memory_count,
            "computed_at": self.computed_at.isoformat(),
            "inputs": self.inputs,
            "model": self.model,
        }


PARTITION_SUMMARISED = EventType(
    PartitionSummarised,
    effect="summary-view.partition",
    applies=Applies.DOCUMENT,
    memories=writes_nothing,
    sealed=("summary",),
    documents=lambda e: (
        DocumentChange(results_of(e.view_id), result_key(e.group), json.dumps(e.document())),
    ),
)


# This family's types: the registry's rows and the `MemoryEvent` union take them from here.
View = (
    SummaryViewDefined
    | SummaryViewRemoved
    | SummaryRunRequested
    | SummaryTaskChanged
    | PartitionSummarised
)
ROWS = (
    SUMMARY_VIEW_DEFINED,
    SUMMARY_VIEW_REMOVED,
    SUMMARY_RUN_REQUESTED,
    SUMMARY_TASK_CHANGED,
    PARTITION_SUMMARISED,
)
