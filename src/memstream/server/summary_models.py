"""agent-memory-server's summary-view and task models, as its clients send and read them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "GROUP_FIELDS",
    "CreateSummaryViewRequest",
    "RunSummaryViewPartitionRequest",
    "RunSummaryViewRequest",
    "SummaryView",
    "SummaryViewPartitionResult",
    "Task",
]

# The fields a view may group and filter by (AMS's).
GROUP_FIELDS = ("user_id", "namespace", "session_id", "memory_type")

_STRICT = ConfigDict(extra="forbid")


class CreateSummaryViewRequest(BaseModel):
    model_config = _STRICT

    name: str | None = None
    source: Literal["long_term", "working_memory"]
    group_by: list[str] = Field(default_factory=list)
    filters: dict[str, Any] = Field(default_factory=dict)
    time_window_days: int | None = Field(default=None, ge=1)
    continuous: bool = False
    prompt: str | None = Field(default=None, max_length=8_000)
    model_name: str | None = None


class SummaryView(CreateSummaryViewRequest):
    model_config = ConfigDict(extra="ignore")

    id: str


class SummaryViewPartitionResult(BaseModel):
    view_id: str
    group: dict[str, str]
    summary: str
    memory_count: int = Field(ge=0)
    computed_at: datetime


class RunSummaryViewPartitionRequest(BaseModel):
    model_config = _STRICT

    group: dict[str, str]


class RunSummaryViewRequest(BaseModel):
    model_config = _STRICT

    task_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    # memstream: summarise every partition again, even where its inputs did not change.
    force: bool = False


class Task(BaseModel):
    id: str
    type: Literal["summary_view_full_run"] = "summary_view_full_run"
    status: Literal["pending", "running", "success", "failed"] = "pending"
    view_id: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    error_message: str | None = None
