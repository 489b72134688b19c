"""The Faust worker: the stream processor that keeps the Redis projection up to date.

What is the worker?
    One Faust app with one agent, `project`, subscribed to the memory topic, and one timer
    that runs the consolidation job (streams.consolidation) for windows that have closed. Each agent
    instance owns some of the topic's partitions, and since the topic is keyed by tenant, all
    events of a tenant arrive at one instance, in the order they were written. The agent is a
    thin loop: it takes what is queued, up to BATCH_SIZE messages (`ready_batches`: at once
    when nothing else is queued, so a lone event does not wait; a backlog makes big batches),
    has them decoded and embedded while Redis applies the batch before (`Overlapping`, in the
    log's order), and lets Faust acknowledge a batch only once it is applied. A crash before
    that means redelivery, which apply-once in Redis turns into a no-op.

Every batch goes through the Healer (streams.heal), which first reads again whatever Redis lost
of the worker's partitions (its recorded positions behind what was consumed or committed); a
second timer runs the same check once a second, for partitions with nothing new to read. A
third looks for a stream that has stopped delivering while Kafka holds records for it
(streams.stall: Faust's consumer, after a broker came back) and then ends the worker.

Messages are read raw (bytes): decoding is the projector's job, so that a malformed message
becomes a dead letter instead of a crashed stream.

Processing guarantee: at-least-once, made exactly-once where it matters by apply-once: the
markers and the writes of an event commit in one Lua script in Redis, so every redelivery
after a crash or a rebalance is a no-op, and every event the worker itself writes (summaries,
notices) carries a deterministic id. Faust's `exactly_once` (Kafka transactions) was measured
and dropped: it added nothing apply-once does not give, and a peer joining stalled the whole
group for minutes or crashed a worker at rebalances (`ProducerFenced`, `Invalid state
transition IN_TRANSACTION -> IN_TRANSACTION`). Dead letters and monitoring events are awaited
before the batch is acknowledged, so they are at-least-once. See docs/streams.md.
"""

from __future__ import annotations

import asyncio
import faulthandler
import functools
import gc
import logging
import os
import signal
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import faust
import mode
from aiokafka import AIOKafkaProducer
from faust.types import EventT
from mode.utils.logging import cry

from memstream.config import Settings
from memstream.errors import InfrastructureError, MemstreamError
from memstream.llm import ModelClient
from memstream.memory.cipher import Keyring
from memstream.memory.embeddings import Embedders
from memstream.memory.monitoring import DeadLettered, Monitor
from memstream.memory.ports import (
    AppliedOutcome,
    Generations,
    MemoryReader,
    Position,
    ProjectionWriter,
    ShardWriters,
)
from memstream.metrics import Metrics
from memstream.streams.consolidation import ConsolidationJob
from memstream.streams.dead_letters import dead_letter_headers
from memstream.streams.extraction import ExtractionJob, ExtractionOutlets, ExtractionParts
from memstream.streams.heal import KafkaLog, ShardHealers
from memstream.streams.kafka import KafkaConnection
from memstream.streams.monitor import KafkaMonitor
from memstream.streams.projector import OnApplied, Overlapping, Projector, RawMessage
from memstream.streams.stall import StallWatch, StreamStalled, first_waiting
from memstream.streams.summaries import SummaryJob, SummaryOutlets, SummaryParts
from memstream.streams.topics import Topics
from memstream.streams.wire import (
    Record,
    event_record,
    monitoring_record,
    producer_config,
    send,
)

__all__ = [
    "BATCH_SIZE",
    "BATCH_WITHIN_S",
    "KEY_WAIT_S",
    "STOP_DEADLINE_S",
    "build_app",
    "run_app",
    "stop_deadline",
    "tick",
]

log = logging.getLogger(__name__)

BATCH_SIZE = 512
# How long the worker waits for a data key its keys topic does not hold yet before it
# dead-letters the event sealed under it: an agent that made the key while Kafka was away
# sends the key's record and the event from two producers, which may land in either order.
KEY_WAIT_S = 60.0
BATCH_WITHIN_S = 0.02
# How often the worker compares Redis's positions with what it consumed (streams.heal): the
# longest a Redis that lost writes under an idle worker stays behind.
_HEAL_CHECK_S = 1.0
# How often the worker measures its consumer lag (metrics, `memstream status`).
_LAG_CHECK_S = 1.0


class _WorkerProducer:
    """Dead letters, monitoring events and summaries, written by a producer of the worker's
    own, configured as every producer is (streams.wire: idempotent, acks=all): Faust's is
    idempotent only inside transactions, so a send it retried after a broker failover could
    land twice. `submit` (the monitor's sink) only starts a send; the agent awaits them all
    (`drained`) before a batch is acknowledged, so notices are at-least-once. A dead letter's
    notice is also announced to `counted` (the metrics), when given."""

    def __init__(
        self, kafka: KafkaConnection, topics: Topics, counted: Monitor | None = None
    ) -> None:
        self._kafka = kafka
        self._topics = topics
        self._counted = counted
        self._sending: list[asyncio.Task[None]] = []
        self._producer: AIOKafkaProducer | None = None
        self._starting = asyncio.Lock()

    async def _started(self) -> AIOKafkaProducer:
        # Made in the app's event loop, on the first record, as aiokafka requires.
        async with self._starting:
            if self._producer is None:
                producer = AIOKafkaProducer(**producer_config(self._kafka, "aiokafka"))
                try:
                    await producer.start()
                except BaseException:
                    await producer.stop()
                    raise
                self._producer = producer
            return self._producer

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def publish(self, record: Record) -> None:
        """Send `record` and wait until the broker has it."""
        await (await send(await self._started(), record))

    async def send(self, message: RawMessage, error: MemstreamError) -> None:
        headers = dead_letter_headers(message, error)
        # Awaiting the delivery, not just the send, keeps the message from being
        # acknowledged on the memory topic before its dead letter is durable.
        await self.publish(Record(self._topics.dead_letters, message.key, message.value, headers))
        notice = DeadLettered(
            source_topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            code=error.code,
            reason=str(error),
            at=datetime.now(UTC),
        )
        await self.publish(monitoring_record(self._topics, notice, message.key))
        if self._counted is not None:
            self._counted.announce(notice)

    def submit(self, record: Record) -> None:
        self._sending.append(asyncio.ensure_future(self.publish(record)))

    async def drained(self) -> None:
        """Wait until every submitted record is durable."""
        sending, self._sending = self._sending, []
        await asyncio.gather(*sending)


def build_app(
    settings: Settings,
    topics: Topics,
    embedders: Embedders,
    shards: ShardWriters,
    reader: MemoryReader,
    summarizer: ModelClient,
    metrics: Metrics | None = None,
    *,
    keyring: Keyring | None = None,
    sealer: Keyring | None = None,
    keys_clock: Callable[[], None] | None = None,
    extraction: ExtractionParts | None = None,
    summaries: SummaryParts | None = None,
) -> faust.App:
    """The worker's Faust app over the given parts (`Deployment.worker_app` gives them):
    `shards` are the projection's shards (their layout, and each one's writer and
    generations); `keyring` opens sealed events, `sealer` (None: plaintext) seals the summaries
    it writes, `keys_clock` writes the keys topic's clock every MEMSTREAM_KEYS_CLOCK_S
    (streams.data_keys); with `metrics`, Faust's sensors and memstream's own are kept in its
    registry; with `extraction`, the extraction job (streams.extraction) runs beside the
    projection, in a consumer group of its own, and with `summaries` the summary-view job
    (streams.summaries) in another."""
    kafka = KafkaConnection.from_settings(settings)
    app = faust.App(
        topics.worker_group,
        broker=kafka.faust_broker(),
        broker_credentials=kafka.faust_credentials(),
        store="memory://",
        # Tables live in memory, so Faust's data folder only ever holds empty folders: keep
        # them out of the working directory.
        datadir=str(Path(tempfile.gettempdir()) / "memstream-faust"),
        web_enabled=False,
        # The leader topic is for Faust features memstream does not use; skipping it avoids
        # one more internal topic per app.
        topic_disable_leader=True,
        # memstream creates every topic it uses, replicated for the cluster (streams.topics);
        # Faust would create one with its own replication factor.
        topic_allow_declare=False,
        topic_partitions=settings.partitions,
        consumer_auto_offset_reset="earliest",
        # Faust's 60 s default keeps a SIGKILLed worker's partitions idle for a minute.
        broker_session_timeout=settings.worker_session_timeout_s,
        broker_heartbeat_interval=settings.worker_session_timeout_s / 5,
        producer_acks=-1,
        # Not exactly_once: Kafka transactions stalled or crashed workers at rebalances, and
        # apply-once already makes every redelivery a no-op (module docstring, docs/streams.md).
        processing_guarantee="at_least_once",
        autodiscover=False,
        # An agent that raises is not started again in this process: its stream still holds
        # the messages it took and never acknowledged, and a replacement left the worker
        # waiting on them at the next rebalance, alive and projecting nothing (`bench chaos`
        # found one). The process exits instead, saying why, and its supervisor starts a
        # fresh one, which reads on from the last commit (apply-once makes that harmless).
        agent_supervisor=mode.CrashingSupervisor,
    )
    raw: dict[str, Any] = {"key_serializer": "raw", "value_serializer": "raw"}
    memory_topic = app.topic(topics.memory, **raw)
    if metrics is not None:  # Faust's own sensors, into memstream's registry
        from faust.sensors.prometheus import PrometheusMonitor

        app.monitor = PrometheusMonitor(metrics=metrics.faust)
    counted = metrics.monitor() if metrics is not None else None
    monitoring = _WorkerProducer(kafka, topics, counted)
    monitor = KafkaMonitor(monitoring, topics, also=counted)
    on_applied: OnApplied | None = (
        (lambda o, at: metrics.worker.observe_applied(o.event.type, at))
        if metrics is not None
        else None
    )

    # One projector and healer per projection shard: each shard's positions, generations and
    # healing are its own. Each fails fast on its Redis, so that a dead shard holds only its
    # own partitions (streams.heal).
    def projector(writer: ProjectionWriter, generations: Generations) -> Projector:
        return Projector(
            embedders,
            writer,
            generations,
            monitoring,
            default_importance=settings.default_importance,
            monitor=monitor,
            keyring=keyring,
            key_wait_s=KEY_WAIT_S,
            on_applied=on_applied,
            failing_fast=True,
        )

    # The group id Faust commits under is the app's id.
    log_source = KafkaLog(kafka, app.conf.id)
    healer = ShardHealers(shards, projector, log_source)
    stall = StallWatch(settings.worker_stall_s)

    held: set[int] = set()  # the memory topic's partitions this worker holds now

    # Faust's signals call receivers with (sender, the partitions, signal=...).
    @app.on_partitions_assigned.connect
    def assigned(sender: Any, /, *partitions: Any, signal: Any, **_: Any) -> None:
        given = _positions(partitions[0])
        held.update(p.partition for p in given if p.topic == topics.memory)
        healer.assigned(given)

    @app.on_partitions_revoked.connect
    def revoked(sender: Any, /, *partitions: Any, signal: Any, **_: Any) -> None:
        taken = _positions(partitions[0])
        held.difference_update(p.partition for p in taken if p.topic == topics.memory)
        healer.revoked(taken)

    consolidation = ConsolidationJob(
        reader=reader,
        client=summarizer,
        embedding_model=embedders.configured_model,
        send=lambda event: monitoring.publish(event_record(topics, event, sealer)),
        monitor=monitor,
        window_s=settings.consolidation_window_s,
    )

    @app.agent(memory_topic, name="project")
    async def project(stream: faust.StreamT[bytes]) -> None:
        stall.began()  # a Redis down at the start holds the stream here: not a stall
        await healer.start()
        stall.ended()

        settled = False

        async def applied(batch: Batch, outcomes: list[AppliedOutcome]) -> None:
            nonlocal settled
            await monitoring.drained()  # its notices and dead letters sent before the ack
            await batch.ack()
            stall.ended()
            if not settled:
                # What start-up and the first batch built (modules, Faust, the embedder's
                # model, clients) lives as long as the process: out of the collector's sight,
                # a full collection no longer walks it all while a batch waits (58 to 135 ms,
                # inside three of five timed rounds of `bench throughput`).
                settled = True
                gc.collect()
                gc.freeze()
            consolidation.observe(outcomes)
            log.info(
                "projected %d messages (%d applied now)",
                len(batch.events),
                sum(o.applied_now for o in outcomes),
            )

        try:
            # Each batch is decoded and embedded while Redis applies the one before, and
            # acknowledged once it is applied itself (`Overlapping`, in the log's order).
            # A batch that fails crashes the worker at once, not at the next batch.
            async with Overlapping(healer, failed=app.crash) as overlapping:
                async for batch in ready_batches(stream, BATCH_SIZE, BATCH_WITHIN_S):
                    stall.began()
                    messages = [
                        RawMessage(
                            topic=e.message.topic,
                            partition=e.message.partition,
                            offset=e.message.offset,
                            key=e.message.key,
                            value=e.message.value,
                            timestamp=datetime.fromtimestamp(e.message.timestamp, UTC),
                        )
                        for e in batch.events
                    ]
                    if metrics is not None:
                        metrics.worker.batch_size.observe(len(messages))
                    await overlapping.project(messages, then=functools.partial(applied, batch))
        finally:
            await monitoring.close()

    @app.timer(interval=0.5)  # type: ignore[untyped-decorator]
    async def consolidate() -> None:
        await tick("consolidating", consolidation.run_due())
        await tick("sending notices", monitoring.drained())

    @app.timer(interval=_HEAL_CHECK_S)  # type: ignore[untyped-decorator]
    async def heal() -> None:
        await tick("looking for shards to heal", healer.check())

    @app.timer(interval=stall.after_s / 4)  # type: ignore[untyped-decorator]
    async def watch_for_a_stall() -> None:
        if not stall.due:
            return
        fields = (Position(topics.memory, partition, -1).field for partition in sorted(held))
        projected = {f: at for f in fields if (at := healer.last_consumed(f)) is not None}
        try:
            waiting = await first_waiting(log_source, projected)
        except InfrastructureError as exc:  # the stream cannot read either: not a stall
            log.info("looking for records the stream has not delivered failed: %s", exc)
            return
        stalled = stall.found(waiting)
        if stalled is not None:
            # Where Faust's tasks wait, for the report (what SIGUSR1 writes); stopping waits on
            # the stalled consumer too, and the deadline ends the process anyway.
            cry(file=_STDERR)
            stop_deadline(STOP_DEADLINE_S)
            await app.crash(StreamStalled(str(stalled)))

    if extraction is not None:
        job = ExtractionJob(
            kafka,
            topics.memory,
            topics.job_groups[0],
            extraction,
            ExtractionOutlets(
                send=lambda event: monitoring.publish(event_record(topics, event, sealer)),
                dead_letter=monitoring.send,
                monitor=monitor,
                keyring=keyring,
                embedding_model=embedders.configured_model,
                default_importance=settings.default_importance,
                max_chars=settings.max_record_chars,
            ),
        )

        @app.task  # type: ignore[untyped-decorator]
        async def extract() -> None:
            await job.run()

    if summaries is not None:
        viewer = SummaryJob(
            kafka,
            topics.memory,
            topics.job_groups[1],
            summaries,
            SummaryOutlets(
                send=lambda event: monitoring.publish(event_record(topics, event, sealer)),
                monitor=monitor,
                keyring=keyring,
                embedding_model=embedders.configured_model,
                default_importance=settings.default_importance,
            ),
        )

        @app.task  # type: ignore[untyped-decorator]
        async def summarise() -> None:
            await viewer.run()

        if summaries.refresh_s:
            every = min(max(summaries.refresh_s / 4, 1.0), 60.0)

            @app.timer(interval=every)  # type: ignore[untyped-decorator]
            async def refresh_views() -> None:
                now = datetime.now(UTC)
                await tick("refreshing summary views", viewer.refresh(frozenset(held), now))

    if keys_clock is not None:
        clock = keys_clock

        @app.timer(interval=settings.keys_clock_s)  # type: ignore[untyped-decorator]
        async def keys_clock_tick() -> None:
            await tick("writing the keys topic's clock", asyncio.to_thread(clock))

    if metrics is not None:
        worker_metrics = metrics.worker

        @app.timer(interval=_LAG_CHECK_S)  # type: ignore[untyped-decorator]
        async def measure_lag() -> None:
            worker_metrics.set_consumer_lag(_consumer_lag(app, topics.memory, healer))

    return app


async def tick(what: str, step: Awaitable[object]) -> None:
    """A timer's step; an outage (Kafka's, a Redis shard's) is logged and the next tick tries
    again. Faust crashes the whole worker on a timer's exception: a summary view's refresh
    meeting a Redis shard's restart stopped workers in `bench chaos`."""
    try:
        await step
    except InfrastructureError as exc:
        log.warning("%s failed; the next tick tries again: %s", what, exc)


def _consumer_lag(app: faust.App, topic: str, healer: ShardHealers) -> dict[tuple[str, int], int]:
    """Per partition of `topic` this worker holds: messages after the last it consumed, by
    the consumer's high watermark (refreshed by every fetch, so it moves while idle too)."""
    consumer: Any = app.consumer
    try:
        held = consumer.assignment()
    except Exception:  # noqa: BLE001 - not started yet, or rebalancing: measured next tick
        return {}
    lag = {}
    for tp in held:
        if tp.topic != topic:
            continue
        end = consumer.highwater(tp)
        consumed = healer.last_consumed(f"{tp.topic}/{tp.partition}")
        if end is None or consumed is None:
            continue  # not fetched, or its committed offset not read yet: unknown
        lag[(tp.topic, tp.partition)] = max(int(end) - consumed - 1, 0)
    return lag


@dataclass(frozen=True, slots=True)
class Batch:
    """Events `ready_batches` handed over, and how to acknowledge them once projected."""

    events: list[EventT[bytes]]
    ack: Callable[[], Awaitable[None]]


async def ready_batches(
    stream: faust.StreamT[bytes], max_: int, within: float
) -> AsyncIterator[Batch]:
    """Batches of the stream's events: Faust's `take_events`, except that a batch is handed
    over as soon as nothing else is queued, instead of waiting `within` for company, and is
    acknowledged only when its `ack` is awaited (after it is applied: the next batch may be
    asked for first, to be prepared meanwhile).

    At light load an event is projected at once; under a backlog the next batch gathers, up
    to `max_`, while one is prepared (the embedder and Redis get big batches exactly when
    there is a backlog, and the embedder finds the next one ready). `within` still bounds
    the wait while more events are arriving. A batch never acknowledged (its projection
    failed, the worker stopped) is read again by whoever holds its partitions next, which
    apply-once makes harmless.
    """
    # This drives faust-streaming 0.15's Stream internals as take_events does
    # (add_processor, _enable_passive, wait_for_stopped, ack); they are not in StreamT.
    faust_stream: Any = stream
    queue = faust_stream.channel.queue
    events: list[EventT[bytes]] = []
    flush = asyncio.Event()
    consumed = asyncio.Event()

    async def add(value: bytes) -> bytes:
        event = faust_stream.current_event
        if event is None:
            raise RuntimeError("a stream event without current_event")
        while len(events) >= max_:  # never more than max_ in one batch
            consumed.clear()
            if (await faust_stream.wait(consumed)).stopped:
                return value  # the worker is stopping: the event is read again by the next
        events.append(event)
        if len(events) >= max_ or queue.empty():
            flush.set()
        return value

    def acknowledging(taken: list[EventT[bytes]]) -> Callable[[], Awaitable[None]]:
        async def ack() -> None:
            for event in taken:
                await faust_stream.ack(event)

        return ack

    acks = faust_stream.enable_acks
    faust_stream.enable_acks = False  # acked by each batch's `ack`, once it is projected
    faust_stream.add_processor(add)
    faust_stream._enable_passive(aiter(faust_stream.channel))
    try:
        while not faust_stream.should_stop:
            await faust_stream.wait_for_stopped(flush, timeout=within)
            if not faust_stream._passive:  # Faust's drainer ended: on an error, or a stop
                _raise_what_stopped(queue)
                return
            if not events:
                continue
            taken = list(events)
            events.clear()
            flush.clear()
            # The next batch gathers while this one is prepared: the embedder finds it ready
            # instead of idling while Faust hands over events one by one (~15 ms a batch).
            consumed.set()
            yield Batch(taken, acknowledging(taken))
    finally:
        faust_stream.enable_acks = acks
        faust_stream._processors.remove(add)


def _raise_what_stopped(queue: Any) -> None:
    """Faust's drainer of the stream has ended. On a stop that is how it ends (what it throws
    into the channel then, if anything, is the end of an iteration or a cancellation); on an
    error in the stream's iteration (an ack, a processor) it throws the error into the
    stream's channel, which nothing reads here, and ends, while the stream, started by its
    agent, does not stop: the agent would wait for ever, alive and projecting nothing. Raise
    it instead: the agent's crash ends the process (`CrashingSupervisor`), and the next worker
    reads on from the last acknowledged message."""
    errors = queue._errors  # mode's ThrowableQueue: what was thrown and not yet read
    error = errors.popleft() if errors else None
    if isinstance(error, Exception) and not isinstance(error, StopAsyncIteration):
        raise RuntimeError(
            f"the memory topic's stream stopped delivering messages: {error!r}; the worker "
            "exits, and the next one reads on from the last acknowledged message"
        ) from error


def _use_uvloop() -> None:
    """Run this process's event loops on uvloop (where it is installed: everywhere but
    Windows), the worker's and the one Faust's consumer thread makes: each batch crosses
    between them, to the embedder's threads and to Redis, and at one or two turns a batch
    those crossings are a good part of a turn's latency. Measured with `bench freshness`
    (docs/benchmarks.md, issue 37): the high-load p50 ratio to the raw pipeline 1.07
    (1.05-1.26, four runs) against 1.53 (1.17-2.15) on asyncio's loop, run in turn."""
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def _positions(partitions: set[faust.types.TP]) -> list[Position]:
    return [Position(tp.topic, tp.partition, -1) for tp in partitions]


def run_app(
    app: faust.App, *, loglevel: str = "info", loghandlers: Sequence[logging.Handler] = ()
) -> None:
    """Run the worker's app until SIGINT or SIGTERM, under faust.Worker; once asked to stop,
    it is gone within STOP_DEADLINE_S (`stop_deadline`). `loghandlers` are added to the root
    logger after Faust has set logging up (it clears the root's handlers)."""
    # A worker that stops making progress says where it is: SIGQUIT writes every thread's
    # stack even when the event loop is blocked (Faust's SIGUSR1 writes the loop's tasks).
    faulthandler.register(signal.SIGQUIT, file=_STDERR, all_threads=True)
    _use_uvloop()
    worker = _DeadlinedWorker(app, loglevel=loglevel, quiet=True)
    worker.loghandlers.extend(loghandlers)  # installed when the worker sets logging up
    worker.execute_from_commandline()


# Where a worker writes its stacks: the process's own stderr (its log), which Faust's
# redirection of sys.stderr into logging leaves alone, and faulthandler needs a file number of.
_STDERR = sys.__stderr__ or sys.stderr

# How long a worker asked to stop may take. Faust stops its consumer, producers and agents in
# turn, and one of them can wait on a broker that does not answer for as long as it likes;
# past this, the worker says where it waits and exits. Nothing is lost: its successor reads
# again from the last committed offsets, and apply-once makes that harmless. Under the 30 s a
# supervisor (Kubernetes, `memstream down`) waits before SIGKILL, so the stacks get written.
STOP_DEADLINE_S = 25.0


def stop_deadline(seconds: float, exit_: Callable[[int], object] = os._exit) -> threading.Timer:
    """A started timer that, unless cancelled within `seconds`, writes every thread's stack
    to stderr and ends the process with status 1 (`exit_`)."""

    def expire() -> None:
        log.error("the worker did not stop within %.0f s; its threads' stacks follow", seconds)
        faulthandler.dump_traceback(file=_STDERR, all_threads=True)
        exit_(1)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


class _DeadlinedWorker(faust.Worker):
    """faust's Worker, gone within STOP_DEADLINE_S of the first SIGINT or SIGTERM, and
    without faust's terminal spinner."""

    def __init__(self, app: faust.App, **options: Any) -> None:
        super().__init__(app, **options)
        # At --loglevel warning the spinner set the root logger to DEBUG to spin on every
        # record: every library's debug records were built (aiokafka's, a few a fetch: ~8 % of
        # the event loop at high load) and its control codes went into the log.
        self.spinner = None

    def _schedule_shutdown(self, signal: signal.Signals) -> None:
        if not self._signal_stop_time:  # the first signal; mode ignores the ones after it
            stop_deadline(STOP_DEADLINE_S)
        super()._schedule_shutdown(signal)

    async def on_startup_finished(self) -> None:
        await super().on_startup_finished()
        log.info("running on %s's event loop", type(self.loop).__module__.partition(".")[0])
