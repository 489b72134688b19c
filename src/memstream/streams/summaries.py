"""The summary job: runs summary views as the log asks, off the hot path.

What does it do?
    It follows the memory topic in a consumer group of its own (`<worker group>.summaries`,
    streams.follower) and acts on each SummaryRunRequested: it waits until the projection has
    applied the request (so every memory the tenant recorded before it is there), reads the
    view and the tenant's memories, partitions them (memory.summaries), and writes one
    PartitionSummarised a partition, keyed by the tenant; for a run of the whole view, its
    task's SummaryTaskChanged events (running, then success or failed) around them.

Why is nothing asked twice?
    A partition whose inputs (memories, instructions, model) have the digest of its stored
    result keeps that summary, unless the run is forced; a replay reads the results from the
    log and asks no model at all. The events' ids derive from the request, so a request read
    again after a crash (the follower's commits never pass it) writes what it wrote before
    once, and finds its task finished where it was.

Without a chat model, each partition's summary lists its memories and says that no model
summarised them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from memstream.errors import EventDecodeError, MemstreamError, UnknownDataKeyError
from memstream.llm import ModelClient
from memstream.memory.cipher import Keyring
from memstream.memory.codec import decode_event
from memstream.memory.events import (
    VIEWS,
    MemoryEvent,
    PartitionSummarised,
    SummaryRunRequested,
    SummaryTaskChanged,
    results_of,
)
from memstream.memory.monitoring import ModelUsage, Monitor
from memstream.memory.ports import EventRef, MemoryLookup, ProjectionProgress
from memstream.memory.summaries import (
    Partition,
    ViewSpec,
    covered,
    inputs_digest,
    nothing_found,
    partitions,
    spec_of,
    summary_request,
    unsummarised,
)
from memstream.memory.tenancy import validate_tenant
from memstream.streams.follower import LogFollower, until_applied
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import RawMessage, worker_context

__all__ = ["UNSUMMARISED", "SummaryJob", "SummaryParts"]

log = logging.getLogger(__name__)

Send = Callable[[MemoryEvent], Awaitable[None]]

# A request is named in its record's JSON: any other record is passed over unread.
_REQUEST = SummaryRunRequested.type.encode()
UNSUMMARISED = "No summary could be generated for this partition."
_PURPOSE = "summary-view"


@dataclass(frozen=True, slots=True)
class SummaryParts:
    """What the deployment configures: the chat model and its name (None and "": none, so
    summaries list their memories) and the projection it reads and checks."""

    client: ModelClient | None
    model: str
    reader: MemoryLookup
    progress: ProjectionProgress
    # Continuous views are run again every `refresh_s` (0: never), each by the worker that
    # holds its tenant's partition (`partition_of`).
    refresh_s: float = 0.0
    partition_of: Callable[[str], int] = lambda tenant: 0


@dataclass(frozen=True, slots=True)
class SummaryOutlets:
    """What the worker gives the job: where its events go, its monitor, and how it reads
    events (their keyring, the fields a producer may leave out)."""

    send: Send
    monitor: Monitor
    keyring: Keyring | None
    embedding_model: str
    default_importance: float


class SummaryJob:
    def __init__(
        self,
        kafka: KafkaConnection,
        topic: str,
        group: str,
        parts: SummaryParts,
        outlets: SummaryOutlets,
    ) -> None:
        self._follower = LogFollower(kafka, topic, group, self.handle, name="summary views")
        self._parts = parts
        self._out = outlets
        self._refreshed: set[tuple[str, str, int]] = set()  # (tenant, view, period) asked

    async def run(self) -> None:
        await self._follower.run()

    async def refresh(self, held: Collection[int], now: datetime) -> list[SummaryRunRequested]:
        """Ask, once a period, for a run of every continuous view of the tenants whose
        partitions are `held`; the requests written. A request's id is the view's and the
        period's, so two workers asking for one period (around a rebalance) ask once."""
        parts = self._parts
        if not parts.refresh_s or not held:
            return []
        period = int(now.timestamp() // parts.refresh_s)
        began = datetime.fromtimestamp(period * parts.refresh_s, UTC)
        self._refreshed = {asked for asked in self._refreshed if asked[2] == period}
        asked: list[SummaryRunRequested] = []
        for stats in await asyncio.to_thread(parts.progress.tenant_stats):
            tenant = stats.tenant
            if parts.partition_of(tenant) not in held:
                continue
            views = await asyncio.to_thread(parts.reader.documents, tenant, VIEWS)
            for view_id, raw in sorted(views.items()):
                due = (tenant, view_id, period) not in self._refreshed
                if not due or not json.loads(raw).get("continuous"):
                    continue
                request = SummaryRunRequested(
                    tenant, f"refresh-{period}-{view_id}", view_id, began, tracked=False
                )
                await self._out.send(request)
                self._refreshed.add((tenant, view_id, period))
                asked.append(request)
        return asked

    async def handle(self, message: RawMessage) -> list[MemoryEvent]:
        """Run the view `message` asks for, if it is a run request; the events written."""
        if _REQUEST not in (message.value or b""):
            return []
        parts, out = self._parts, self._out
        context = worker_context(message, out.embedding_model, out.default_importance,
                                 out.keyring)  # fmt: skip
        try:
            request = decode_event(message.value or b"", context)
        except (EventDecodeError, UnknownDataKeyError):
            return []  # the projector dead-letters it, or waits for its key
        if not isinstance(request, SummaryRunRequested):
            return []
        await until_applied(parts.progress, request, "the summary job")
        written: list[MemoryEvent] = []

        async def write(event: MemoryEvent) -> None:
            await out.send(event)
            written.append(event)

        await self._run(request, write)
        return written

    async def _run(self, request: SummaryRunRequested, write: Send) -> None:
        parts = self._parts
        task = request.task()
        if task is not None:
            ended = [EventRef(task.tenant, _changed(task, s).id) for s in ("success", "failed")]
            if len(await asyncio.to_thread(parts.progress.unapplied, ended)) < len(ended):
                return  # read again after a crash: it finished before
        started = datetime.now(UTC)
        if task is not None:
            await write(_changed(task, "running", started_at=started))
        tenant = validate_tenant(request.tenant)
        raw = (await asyncio.to_thread(parts.reader.documents, tenant, VIEWS)).get(request.view_id)
        if raw is None:
            log.info("summary run %s: view %s is gone", request.id, request.view_id)
            if task is not None:
                failed = f"SummaryView {request.view_id} not found"
                await write(_changed(task, "failed", started, error_message=failed))
            return
        try:
            for result in await self._summarise(request, spec_of(json.loads(raw))):
                await write(result)
        except MemstreamError as exc:
            if task is None:
                raise
            await write(_changed(task, "failed", started, error_message=str(exc)))
            return
        if task is not None:
            await write(_changed(task, "success", started))

    async def _summarise(
        self, request: SummaryRunRequested, spec: ViewSpec
    ) -> list[PartitionSummarised]:
        parts = self._parts
        tenant = validate_tenant(request.tenant)
        memories = await asyncio.to_thread(parts.reader.memories, tenant)
        now = datetime.now(UTC)
        chosen = (
            partitions(spec, memories, now)
            if request.whole
            else [covered(spec, memories, request.group, now)]
        )
        stored = await asyncio.to_thread(parts.reader.documents, tenant, results_of(spec.view_id))
        results = []
        for partition in chosen:
            digest = inputs_digest(spec, partition, parts.model)
            kept = json.loads(stored[partition.key]) if partition.key in stored else None
            if kept is not None and kept.get("inputs") == digest and not request.force:
                summary, tokens = kept["summary"], (0, 0)
                at = datetime.fromisoformat(kept["computed_at"])
            else:
                summary, tokens = await asyncio.to_thread(self._summary, spec, partition)
                at = datetime.now(UTC)
                if summary == UNSUMMARISED:
                    digest = ""  # a failure is asked again next time
            results.append(
                PartitionSummarised(
                    tenant=tenant,
                    view_id=spec.view_id,
                    run=request.id,
                    group=partition.group,
                    summary=summary,
                    memory_count=len(partition.memories),
                    inputs=digest,
                    model=parts.model if parts.client is not None else "",
                    computed_at=at,
                    input_tokens=tokens[0],
                    output_tokens=tokens[1],
                )
            )
            if tokens != (0, 0):
                usage = ModelUsage(
                    tenant=tenant,
                    thread="",
                    purpose=_PURPOSE,
                    calls=1,
                    input_tokens=tokens[0],
                    output_tokens=tokens[1],
                    at=at,
                )
                self._out.monitor.announce(usage)
        return results

    def _summary(self, spec: ViewSpec, partition: Partition) -> tuple[str, tuple[int, int]]:
        """A partition's summary and the tokens it took (in, out)."""
        client = self._parts.client
        if not partition.memories:
            return nothing_found(partition.group), (0, 0)
        if client is None:
            return unsummarised(partition), (0, 0)
        try:
            reply = client.complete(summary_request(spec, partition))
        except MemstreamError as exc:
            log.warning("summary of view %s, group %s failed: %s", spec.view_id,
                        dict(partition.group), exc)  # fmt: skip
            return UNSUMMARISED, (0, 0)
        usage = reply.usage
        return reply.message.content.strip() or UNSUMMARISED, (
            usage.input_tokens,
            usage.output_tokens,
        )


def _changed(
    task: SummaryTaskChanged,
    status: str,
    started_at: datetime | None = None,
    *,
    error_message: str | None = None,
) -> SummaryTaskChanged:
    ended = datetime.now(UTC) if status in ("success", "failed") else None
    return SummaryTaskChanged(
        tenant=task.tenant,
        task_id=task.task_id,
        run=task.run,
        view_id=task.view_id,
        status=status,
        created_at=task.created_at,
        started_at=started_at,
        completed_at=ended,
        error_message=error_message,
    )
