"""What is done with a deployment, as opposed to how it is wired (`memstream.deployment`):
erase a tenant, drop a namespace, run a worker in this process or start one as a child,
re-drive dead letters, beat for `memstream status`, measure the projection's lag (per shard
too), and reextract a tenant's memories.

The CLI, the benches and the tests call these; each takes the `Deployment` whose parts it
uses and reaches the projection only through its ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memstream.deployment import Deployment
from memstream.errors import (
    ConfigurationError,
    ExtractionOutputError,
    InvalidInputError,
    KafkaUnavailableError,
    MemstreamError,
    ModelRefusedError,
    ProjectionLagError,
    ReshardError,
)
from memstream.health import Heartbeat, LastError
from memstream.llm import ModelClient
from memstream.memory.events import MemoriesExtracted, MemoryEvent, TenantErased
from memstream.memory.extraction import Extracting, Redo, extract, redos
from memstream.memory.monitoring import Monitor
from memstream.memory.ports import Resharding, SessionMove, ShardLayout, ShardReport
from memstream.memory.tenancy import validate_tenant
from memstream.processes import running
from memstream.streams.admin import KafkaAdmin
from memstream.streams.dead_letters import DeadLetterRetry
from memstream.streams.extraction import extraction_spent, purpose
from memstream.streams.heal import Healer, KafkaLog
from memstream.streams.projector import DeadLetters, Projector, ShardProjectors
from memstream.streams.replay import CountedDeadLetters
from memstream.streams.topics import end_offsets, topic_partitions

__all__ = [
    "Erasure",
    "Reextraction",
    "Resharded",
    "ShardState",
    "dead_letter_retry",
    "drop",
    "erase_tenant",
    "heartbeat",
    "projection_lag",
    "reextract",
    "reshard",
    "run_worker",
    "shard_states",
    "worker_process",
]

_WORKER_READY_S = 90.0


@dataclass(frozen=True, slots=True)
class Erasure:
    """What erasing a tenant did: its event, the data keys destroyed, the Redis files
    rewritten, and whether the log was sealed at all (False: encryption was never set up, so
    the log's plaintext was not reached)."""

    event: TenantErased
    destroyed: tuple[str, ...]
    rewritten: tuple[str, ...]
    sealed: bool


def erase_tenant(deployment: Deployment, tenant: str, *, timeout_s: float = 120.0) -> Erasure:
    """Crypto-shred `tenant` (`memstream forget --tenant T --erase`, docs/erasure.md):
    destroy its data keys (tombstones in the keys topic, gone from disk once compacted),
    write a TenantErased event, wait until the live projection has deleted the tenant's
    memories, then rewrite Redis's files so their plaintext copy is gone from its disk.
    Idempotent: running it again destroys what keys the tenant has since made."""
    validate_tenant(tenant)
    # A turn this process recorded before the erasure may still wait in the agent side's
    # buffer, to be sealed there: sealed after its key is destroyed, it would be sealed under a
    # new key and land after the erasure, surviving it.
    if not deployment.flush(timeout_s):
        raise KafkaUnavailableError(
            f"events recorded in this process before the erasure of tenant {tenant!r} did not "
            f"reach Kafka at {deployment.kafka.where} within {timeout_s:.0f}s, so nothing was "
            "erased yet; check the broker (`memstream status`) and run the erasure again"
        )
    keyring = deployment.keyring()
    destroyed = keyring.erase(tenant) if keyring is not None else []
    event = TenantErased(
        tenant=tenant,
        request_id=uuid.uuid4().hex,
        requested_at=datetime.now(UTC),
        key_ids=tuple(destroyed),
    )

    async def publish() -> None:
        await deployment.ensure_topics()
        # TenantErased has no sealed fields: it names no content and stays readable.
        async with deployment.event_publisher() as publisher:
            await publisher.publish([event])

    asyncio.run(publish())
    if deployment.status().wait_applied([event], timeout_s):
        raise ProjectionLagError(
            f"the erasure of tenant {tenant!r} is in the log (its keys are destroyed) but no "
            f"worker applied it within {timeout_s:.0f}s, so Redis's files were not rewritten; "
            "start a worker (`memstream worker`) and run the erasure again"
        )
    rewritten = deployment.projection.rewrite_files(timeout_s, validate_tenant(tenant))
    return Erasure(event, tuple(destroyed), tuple(rewritten), sealed=keyring is not None)


def drop(deployment: Deployment) -> None:
    """Delete everything of the deployment's namespace: every generation's index and keys,
    and its topics. For tests and benches; irreversible."""
    deployment.projection.drop()
    with contextlib.suppress(KafkaUnavailableError):  # the keys are gone; a topic left is harmless
        asyncio.run(_delete_topics(deployment))


async def _delete_topics(deployment: Deployment) -> None:
    async with KafkaAdmin(deployment.kafka, "delete the namespace's topics") as admin:
        existing = set(await admin.call("list the topics", lambda client: client.list_topics()))
        names = [spec.name for spec in deployment.topics.specs() if spec.name in existing]
        if names:
            await admin.call("delete the topics", lambda client: client.delete_topics(names))


def heartbeat(
    deployment: Deployment,
    kind: str,
    errors: LastError,
    *,
    lag: Callable[[], int | None] = lambda: None,
    metrics_port: int = 0,
) -> Heartbeat:
    """This process's heartbeat under the namespace (its kind, lag, last error and metrics
    port), for `memstream status`; start it, and stop it on the way out."""
    return Heartbeat(
        deployment.projection.processes(),
        kind,
        errors=errors,
        lag=lag,
        metrics_port=metrics_port or None,
    )


def run_worker(
    deployment: Deployment, *, loglevel: str = "info", metrics_port: int | None = None
) -> None:
    """Create the topics if needed, then run the worker until SIGINT or SIGTERM: its metrics
    served on `metrics_port` (default MEMSTREAM_WORKER_METRICS_PORT; 0: not served), its lag
    and last error kept for `memstream status` (a heartbeat)."""
    from memstream.streams.worker import run_app

    port = deployment.settings.worker_metrics_port if metrics_port is None else metrics_port
    deployment.check_embedder()
    asyncio.run(deployment.ensure_topics())
    app = deployment.worker_app()
    host = deployment.settings.worker_metrics_host
    stop_serving = deployment.metrics.serve(port, host) if port else None
    errors = LastError()
    lag = deployment.metrics.worker
    beat = heartbeat(deployment, "worker", errors, lag=lambda: lag.total_lag, metrics_port=port)
    beat.start()
    try:
        run_app(app, loglevel=loglevel, loghandlers=[errors])
    finally:
        beat.stop()
        if stop_serving is not None:
            stop_serving()


def worker_process(
    deployment: Deployment,
    log: Path,
    probe: MemoryEvent,
    *,
    loglevel: str = "info",
    metrics_port: int = 0,
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """A `memstream worker` process on the deployment's namespace, projecting (it has
    applied `probe`) when the block starts and stopped when it ends (serving its metrics on
    `metrics_port` when given; with 0 none, whatever MEMSTREAM_WORKER_METRICS_PORT says, as
    several such workers run at once). Tests and benches use it."""

    async def publish() -> None:
        await deployment.ensure_topics()  # a fresh namespace has none until a worker starts
        async with deployment.event_publisher() as publisher:
            await publisher.publish([probe])

    asyncio.run(publish())
    status = deployment.status()
    return running(
        [
            sys.executable,
            "-m",
            "memstream",
            "worker",
            "--loglevel",
            loglevel,
            "--metrics-port",
            str(metrics_port),
        ],
        env={**os.environ, **deployment.settings.environ()},
        log=log,
        ready=lambda: not status.unapplied([probe]),
        what=f"the worker of namespace {deployment.settings.namespace}",
        timeout_s=_WORKER_READY_S,
    )


def projection_lag(deployment: Deployment) -> dict[int, int]:
    """Per partition of the memory topic: messages the live projection has not applied."""
    topic = deployment.topics.memory
    positions = deployment.status().positions()
    ends = asyncio.run(end_offsets(deployment.kafka, topic))
    return {p: _lag(end, positions, f"{topic}/{p}") for p, end in ends.items()}


@dataclass(frozen=True, slots=True)
class ShardState:
    """A projection shard (`report`), its partitions and their lag: messages its live
    generation has not applied (None while the shard does not answer)."""

    report: ShardReport
    partitions: tuple[int, ...]
    lag: int | None


def shard_states(deployment: Deployment) -> list[ShardState]:
    """Every shard of the projection, reachable or not, with the lag of its partitions
    (`memstream stats`, `memstream status`)."""
    topic = deployment.topics.memory
    ends = asyncio.run(end_offsets(deployment.kafka, topic))
    of_partition = deployment.projection.current_layout().of_partition
    states = []
    for report in deployment.projection.shard_reports():
        own = tuple(p for p in sorted(ends) if of_partition(p) == report.shard)
        lag = (
            sum(_lag(ends[p], report.positions, f"{topic}/{p}") for p in own)
            if report.reachable
            else None
        )
        states.append(ShardState(report, own, lag))
    return states


def _lag(end: int, positions: Mapping[str, int], field: str) -> int:
    return max(end - positions.get(field, -1) - 1, 0)


@asynccontextmanager
async def dead_letter_retry(deployment: Deployment) -> AsyncIterator[DeadLetterRetry]:
    """Re-drives dead letters into the live projection with the worker's parts, each to the
    shard of its partition (`memstream dead-letters retry`)."""
    projection = deployment.projection
    async with contextlib.AsyncExitStack() as sessions:
        parts = [
            await sessions.enter_async_context(projection.session(shard))
            for shard in range(projection.current_layout().count)
        ]

        def projector(dead_letters: DeadLetters, monitor: Monitor) -> ShardProjectors:
            return ShardProjectors(
                [
                    Projector(
                        deployment.embedders,
                        session.writer,
                        session.generations,
                        dead_letters,
                        default_importance=deployment.settings.default_importance,
                        monitor=monitor,
                        keyring=deployment.keyring(),
                    )
                    for session in parts
                ],
                projection.current_layout().of_partition,
            )

        counted = deployment.metrics.monitor()
        async with DeadLetterRetry(
            deployment.kafka, deployment.topics, projector, counted=counted
        ) as retry:
            yield retry


@dataclass(frozen=True, slots=True)
class Resharded:
    """A finished reshard: the layouts before and after, the partitions that moved, and how
    long each step took. `window_s` bounds how long after the switch a process may still
    route a moved tenant to its old shard (which keeps its data until `dropped`);
    `caught_up_s` is how long the new shards took to take in what the old ones applied
    between the warm-up and the switch (a moved tenant's newest memories may be missing from
    its recall for that long)."""

    old: ShardLayout
    new: ShardLayout
    moved: tuple[int, ...]
    warm_s: float
    window_s: float
    caught_up_s: float
    dropped: int
    elapsed_s: float


def reshard(
    deployment: Deployment,
    urls: Sequence[str],
    *,
    say: Callable[[str], None] = lambda _: None,
    timeout_s: float = 300.0,
) -> Resharded:
    """Move the projection online onto the shards `urls` (`memstream reshard --to`).

    Fill each partition's new shard from the log while recall answers from the current
    layout; store the new layout on shard 0 (every process follows it within the
    projection's `layout_window_s`, without a restart); wait until the new shards hold all
    their old shards applied; then drop the moved tenants from their old shards. Shard 0
    stays first; `urls` may grow or shrink the count as long as every shard gets a
    partition. Nothing is lost or doubled: every write is apply-once, and the workers heal a
    partition's new shard from the log."""
    started = time.monotonic()
    resharding = deployment.projection.resharding()
    stored = resharding.stored()
    old = deployment.projection.current_layout()
    new = ShardLayout(tuple(urls), old.version + 1)
    partitions = _reshard_partitions(deployment, old, new)
    moved = tuple(p for p in range(partitions) if old.url_of(p) != new.url_of(p))
    topic = deployment.topics.memory
    say(f"reshard: {len(moved)} of {partitions} partitions move: {list(moved)}")

    # A second pass takes in what arrived during the first (short: positions hold), so that
    # little is left for the workers to heal into the new shards after the switch.
    for _ in range(2):
        asyncio.run(_warm(deployment, resharding, new, moved))
    warm_s = time.monotonic() - started
    say(f"reshard: the new shards caught up with the log in {warm_s:.1f}s")
    # Working memory is not in the log: it is copied, once before the switch (all of it) and
    # once after every process routes by the new layout (what was put meanwhile).
    moves = _session_moves(deployment, resharding, old, new, moved)
    copied = [move.copy(carries) for move, carries in moves]
    say(f"reshard: copied {sum(map(len, copied))} sessions to their new shards")

    if not resharding.publish(new, replaces=stored.version if stored else 0):
        raise ReshardError(
            "another reshard stored a layout while this one ran; nothing was switched (the "
            "shards this one filled keep copies that the next reshard overwrites). Run "
            "`memstream stats` and reshard again from the layout it shows."
        )
    switched = time.monotonic()
    window_s = resharding.window_s
    say(f"reshard: layout {new.version} stored; every process follows within {window_s}s")

    # The old shards keep the moved tenants until every process routes by the new layout and
    # the new shards hold all the old ones applied (the workers heal them from the log).
    deadline = switched + timeout_s
    fields = {p: f"{topic}/{p}" for p in moved}
    caught_up_s: float | None = None
    while True:
        behind = [
            p
            for p in moved
            if resharding.positions(new.url_of(p)).get(fields[p], -1)
            < resharding.positions(old.url_of(p)).get(fields[p], -1)
        ]
        now = time.monotonic()
        if not behind and caught_up_s is None:
            caught_up_s = now - switched
        if caught_up_s is not None and now - switched >= 2 * window_s:
            break
        if now > deadline:
            raise ReshardError(
                f"the new shards did not catch up with partitions {behind} within "
                f"{timeout_s:.0f}s of the switch; is a worker running? The new layout is "
                "live; run `memstream reshard` with the same shards again to finish"
            )
        time.sleep(0.1)

    again = sum(
        len(move.copy(carries, copied=first))
        for (move, carries), first in zip(moves, copied, strict=True)
    )
    for move, carries in moves:
        move.drop(carries)
    say(f"reshard: copied {again} sessions put during the switch; dropped the old copies")

    partition_of = deployment.partition_of
    dropped = 0
    for url in old.urls:
        leaving = {p for p in moved if old.url_of(p) == url}
        if leaving:
            dropped += resharding.drop_moved(
                url,
                lambda tenant, leaving=leaving: partition_of(tenant) in leaving,  # type: ignore[misc]
                [fields[p] for p in leaving],
            )
    say(f"reshard: dropped {dropped} moved tenants from their old shards")
    return Resharded(
        old, new, moved, warm_s, window_s, caught_up_s, dropped, time.monotonic() - started
    )


def _session_moves(
    deployment: Deployment,
    resharding: Resharding,
    old: ShardLayout,
    new: ShardLayout,
    moved: Sequence[int],
) -> list[tuple[SessionMove, Callable[[str], bool]]]:
    """One session move per (old shard, new shard) pair that partitions move between, with
    which tenants it carries."""
    pairs: dict[tuple[str, str], set[int]] = {}
    for p in moved:
        pairs.setdefault((old.url_of(p), new.url_of(p)), set()).add(p)
    partition_of = deployment.partition_of
    return [
        (
            resharding.session_move(source, target),
            lambda tenant, own=frozenset(own): partition_of(tenant) in own,  # type: ignore[misc]
        )
        for (source, target), own in pairs.items()
    ]


def _reshard_partitions(deployment: Deployment, old: ShardLayout, new: ShardLayout) -> int:
    """The memory topic's partition count, once the new layout is checked against it."""
    urls = new.urls
    if len(set(urls)) != len(urls):
        raise InvalidInputError("--to names a Redis twice; give each shard its own Redis")
    if any("@" in url for url in urls):
        raise InvalidInputError(
            "--to URLs carry no user or password (the layout is stored in Redis, readable by "
            "every process); set MEMSTREAM_REDIS_USERNAME and MEMSTREAM_REDIS_PASSWORD, which "
            "every shard uses"
        )
    if urls[0] != old.urls[0]:
        raise InvalidInputError(
            f"--to must keep shard 0 first ({old.urls[0]}): the layout, API keys and "
            "heartbeats live there"
        )
    partitions = len(asyncio.run(topic_partitions(deployment.kafka, deployment.topics.memory)))
    if partitions == 0:
        raise InvalidInputError("the memory topic does not exist yet: set MEMSTREAM_REDIS_SHARDS")
    if len(urls) > partitions:
        raise InvalidInputError(
            f"{len(urls)} shards need at least as many partitions; the memory topic has "
            f"{partitions} (each shard holds partitions p with p mod shards = its number)"
        )
    return partitions


async def _warm(
    deployment: Deployment, resharding: Resharding, new: ShardLayout, moved: Sequence[int]
) -> None:
    """Fill each moved partition's new shard from the log, up to the log's end now."""
    topic = deployment.topics.memory
    ends = await end_offsets(deployment.kafka, topic)
    targets: dict[str, list[int]] = {}
    for p in moved:
        targets.setdefault(new.url_of(p), []).append(p)
    for url, own in targets.items():
        async with resharding.session(url) as session:
            projector = Projector(
                deployment.embedders,
                session.writer,
                session.generations,
                CountedDeadLetters(),  # the live worker dead-lettered them once
                default_importance=deployment.settings.default_importance,
                keyring=deployment.keyring(),
            )
            await projector.start()
            healer = Healer(projector, session.writer, KafkaLog(deployment.kafka, ""))
            await healer.catch_up({f"{topic}/{p}": ends[p] - 1 for p in own if ends[p] > 0})


# -- reextraction ----------------------------------------------------------------------------
#
# Extraction asks a model once per turn and way of extracting, and the log keeps the answer for
# good: replays and re-embeddings never ask again (streams.extraction). A better model, strategy
# or prompt is the one reason to ask again, and `reextract` is that: it reads the tenant's log,
# picks the turns (`memory.extraction.redos`: recorded since a moment, not extracted this way
# yet, still held), asks the chat model, and writes one MemoriesExtracted per turn whose facts
# replace those of the turn's earlier extractions (`replaces`): the projection swaps them in
# one apply, so recall never sees a turn's old and new facts together, nor neither. It spends
# the tenant's daily extraction budget as the job does and stops when it is spent; a turn the
# model cannot answer is counted and left as it was. Run again, it goes on where it stopped.


@dataclass(frozen=True, slots=True)
class Reextraction:
    """What a reextraction did: turns asked about again, the facts written and the earlier
    memories they replaced, the turns passed over (extracted this way already; nothing held
    to derive from), those the model could not answer, the tokens spent, and why it stopped
    before the end ("": it did not)."""

    asked: int
    facts: int
    replaced: int
    already: int
    gone: int
    failed: tuple[str, ...]
    input_tokens: int
    output_tokens: int
    stopped: str = ""


Progress = Callable[[int, int], None]


async def reextract(
    deployment: Deployment,
    tenant: str,
    how: Extracting,
    *,
    since: datetime | None = None,
    wait_s: float = 300.0,
    progress: Progress | None = None,
) -> Reextraction:
    """Reextract `tenant`'s turns recorded since `since` (None: all) the way `how`, with the
    configured chat model; returns once the live projection has applied what was written
    (MemstreamError if not within `wait_s`). `progress(done, total)` after each turn."""
    tenant_id = validate_tenant(tenant)
    settings = deployment.settings
    client = deployment.chat_model()
    if client is None:
        raise ConfigurationError(
            "reextract needs a chat model: set MEMSTREAM_CHAT_BASE_URL and MEMSTREAM_CHAT_MODEL "
            "to an OpenAI-compatible API"
        )
    model = settings.chat_model
    log = await asyncio.to_thread(deployment.lineage().log, tenant_id)
    held = {m.id for m in await asyncio.to_thread(deployment.reader().memories, tenant_id)}
    plan = redos([entry.event for entry in log.events], held, how, model, since=since)
    ledger, budget = deployment.token_ledger(), settings.extraction_daily_tokens
    written: list[MemoriesExtracted] = []
    failed: list[str] = []
    stopped = ""
    await deployment.ensure_topics()
    async with deployment.event_publisher() as publisher:
        for done, redo in enumerate(plan.todo):
            spent = await asyncio.to_thread(
                extraction_spent, ledger, datetime.now(UTC).date(), tenant_id
            )
            if budget and spent >= budget:
                stopped = (
                    f"tenant {tenant!r} spent {spent} of its {budget} extraction tokens today "
                    f"(MEMSTREAM_EXTRACTION_DAILY_TOKENS); {len(plan.todo) - done} turns left: "
                    "run it again tomorrow, or raise the budget"
                )
                break
            try:
                event = await asyncio.to_thread(_ask, deployment, client, how, model, redo)
            except (ModelRefusedError, ExtractionOutputError):
                failed.append(redo.source.event_id)
                continue
            await publisher.publish([event])
            tokens = event.input_tokens + event.output_tokens
            await asyncio.to_thread(
                ledger.spend, event.extracted_at.date(), tenant_id, purpose(how), tokens
            )
            written.append(event)
            if progress is not None:
                progress(done + 1, len(plan.todo))
    pending = await asyncio.to_thread(deployment.status().wait_applied, written, wait_s)
    if pending:
        raise MemstreamError(
            f"the reextracted memories were written to the log but not applied within "
            f"{wait_s:.0f}s; is a worker running (`memstream worker`)? They will be applied."
        )
    return Reextraction(
        asked=len(written) + len(failed),
        facts=sum(len(e.facts) for e in written),
        replaced=sum(len(e.replaces) for e in written),
        already=plan.already,
        gone=plan.gone,
        failed=tuple(failed),
        input_tokens=sum(e.input_tokens for e in written),
        output_tokens=sum(e.output_tokens for e in written),
        stopped=stopped,
    )


def _ask(
    deployment: Deployment, client: ModelClient, how: Extracting, model: str, redo: Redo
) -> MemoriesExtracted:
    settings = deployment.settings
    event = extract(
        redo.source,
        client,
        how,
        model=model,
        embedding_model=deployment.embedders.configured_model,
        max_chars=settings.max_record_chars,
        now=datetime.now(UTC),
    )
    return dataclasses.replace(event, replaces=redo.replaces)
