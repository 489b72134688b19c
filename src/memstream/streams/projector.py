"""The projector: what the worker does with each batch of messages from the memory topic.

For a batch it decodes every message (an unusable one goes to the dead letters, and the batch
goes on), embeds the memories of all good events in one call, applies each event once to the
Redis projection, and announces what applying did (evictions, forgets, consolidations). The
live worker writes the live generation; a replay runs the same projector `into` the generation
it rebuilds, with its own dead letters and no announcements.

Which model embeds a memory is the projection's choice, never the event's: each generation
records the model it was built with (a new one: the configured model), and the projector
embeds for the generation it writes. An event's `embedding_model` only says what its producer
was using. When a replay swaps in a generation of another model mid-batch, the events the old
one refused are embedded again for the new one.

It never gives up on a good event:
while Redis or the embedding provider is unreachable it retries with backoff, so the consumer
does not move past events that were not applied (the stream acknowledges a batch only after
`project` returns). The one exception is a projector made `failing_fast` on its Redis: the
worker of a sharded projection gives each shard's projector that, so that one dead shard
does not hold the others' events; it hands the dead shard's partitions to healing instead
(streams.heal), which reads them from the log once the shard answers again.

It knows nothing of Faust: the worker module feeds it, and tests can call it directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Generic, Protocol, TypeVar, cast

import numpy as np
from aiokafka import ConsumerRecord

from memstream.errors import (
    DataKeyErasedError,
    EventDecodeError,
    EventUnusableError,
    InfrastructureError,
    RedisUnavailableError,
    UnknownDataKeyError,
)
from memstream.memory.cipher import Keyring
from memstream.memory.codec import DecodeContext, decode_event
from memstream.memory.embeddings import Embedder, Embedders, Vectors
from memstream.memory.events import (
    REGISTRY,
    Applies,
    MemoryEvent,
    TenantErased,
    memories_of,
)
from memstream.memory.model import Memory
from memstream.memory.monitoring import Consolidated, Evicted, Forgotten, Monitor, TenantNotice
from memstream.memory.ports import (
    AppliedOutcome,
    Embedded,
    Generations,
    Position,
    ProjectionWriter,
)
from memstream.memory.provenance import provenance_of

__all__ = [
    "DeadLetters",
    "OnApplied",
    "Overlapping",
    "Prepared",
    "Preparing",
    "Projecting",
    "Projector",
    "RawMessage",
    "ShardProjectors",
    "notices_of",
    "worker_context",
]

log = logging.getLogger(__name__)
T = TypeVar("T")
P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class RawMessage:
    """One message as the consumer read it, before decoding."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: datetime | None = None  # the record's: a turn's `recorded_at` if it has none

    @property
    def position(self) -> Position:
        return Position(self.topic, self.partition, self.offset)

    @classmethod
    def of(cls, record: ConsumerRecord[bytes | None, bytes | None]) -> RawMessage:
        """A message read by an aiokafka consumer (replay, verify, the bench)."""
        at = datetime.fromtimestamp(record.timestamp / 1000, UTC) if record.timestamp else None
        return cls(record.topic, record.partition, record.offset, record.key, record.value, at)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A batch `Projector.prepare` made ready to apply: its messages, the good events with
    their memories and places in the log, when each was written to the log, and the events
    embedded for `generation`'s model."""

    messages: tuple[RawMessage, ...]
    ready: tuple[tuple[MemoryEvent, tuple[Memory, ...], Position], ...]
    written: dict[str, datetime | None]
    batch: tuple[Embedded, ...]
    generation: int


# Told of each event applied for the first time, with the time its message was written to the
# log (metrics: events applied by type, end-to-end lag).
OnApplied = Callable[[AppliedOutcome, datetime | None], None]


class DeadLetters(Protocol):
    async def send(self, message: RawMessage, error: EventDecodeError) -> None:
        """Keep `message` byte for byte with the reason it was refused, and announce it."""
        ...


class Projector:
    def __init__(
        self,
        embedders: Embedders,
        writer: ProjectionWriter,
        generations: Generations,
        dead_letters: DeadLetters,
        *,
        default_importance: float,
        monitor: Monitor | None = None,
        on_applied: OnApplied | None = None,
        into: int | None = None,
        reuse_vectors: bool = False,
        first_retry_s: float = 0.2,
        max_retry_s: float = 10.0,
        keyring: Keyring | None = None,
        key_wait_s: float = 0.0,
        failing_fast: bool = False,
    ) -> None:
        self._embedders = embedders
        self._generations = generations
        # generation -> the embedder of its vectors (a generation's model never changes)
        self._models: dict[int, Embedder] = {}
        self._default_importance = default_importance
        self._writer = writer
        self._dead_letters = dead_letters
        self._monitor = monitor
        self._on_applied = on_applied
        self._into = into
        self._reuse_vectors = reuse_vectors
        self._first_retry_s = first_retry_s
        self._max_retry_s = max_retry_s
        self._keyring = keyring
        self._key_wait_s = key_wait_s
        self._failing_fast = failing_fast
        self._live: int | None = None  # the live generation as last read (`_target`)
        # Events sealed under a destroyed data key: skipped, neither applied nor dead-lettered
        # (their content is gone by design, docs/erasure.md), counted here.
        self.erased = 0

    async def start(self) -> None:
        """Prepare the generation this projector writes (its index: for the configured model
        if it has none) and the embedder of its model. A ConfigurationError here names the
        model this process cannot make vectors of, and what fixes it."""
        generation = await self._target()
        embedder = await self._embedder_for(generation)
        model, dims, into = embedder.model_id, embedder.dims, self._into
        await self.retrying(
            "preparing the index",
            lambda: (
                self._writer.ensure_live_index(model, dims)
                if into is None
                else self._writer.ensure_index(model, dims, into)
            ),
        )

    async def project(self, messages: Sequence[RawMessage]) -> list[AppliedOutcome]:
        return await self.commit(await self.prepare(messages))

    async def prepare(self, messages: Sequence[RawMessage]) -> Prepared:
        """Everything before Redis is written: `messages` decoded (the unusable ones sent to
        the dead letters) and their memories embedded, for `commit` to apply. `Overlapping`
        prepares a batch while Redis applies the one before."""
        ready: list[tuple[MemoryEvent, tuple[Memory, ...], Position]] = []
        written: dict[str, datetime | None] = {}
        for message in messages:
            try:
                event = await self._decode(message)
                if isinstance(event, TenantErased) and self._keyring is not None:
                    # Events after the erasure sealed under its keys (a producer that had
                    # not yet heard of it) are erased too, whatever the keys topic says yet.
                    self._keyring.forget(event.tenant, event.key_ids)
                memories = _effects(event)
            except DataKeyErasedError:
                self.erased += 1
                log.debug("skipped %s/%s@%s: sealed under an erased key", *_where(message))
                continue
            except EventDecodeError as exc:
                log.warning("dead-lettered %s/%s@%s: %s", *_where(message), exc)
                await self._dead_letters.send(message, exc)
                continue
            ready.append((event, memories, message.position))
            written[event.id] = message.timestamp
        if not ready:
            return Prepared(tuple(messages), (), {}, (), 0)
        generation = await self._target()
        batch = await self._embedded(ready, await self._embedder_for(generation))
        return Prepared(tuple(messages), tuple(ready), written, tuple(batch), generation)

    async def commit(
        self, prepared: Prepared, *, follows: Mapping[str, int] | None = None
    ) -> list[AppliedOutcome]:
        """Apply a prepared batch: each event once, then the positions. With `follows` (the
        offset before the batch's first message, per partition), the apply script writes
        nothing where Redis's positions have not reached them (PositionsBehind); a batch with
        nothing to apply runs no script and checks nothing."""
        outcomes = await self._apply(prepared, follows)
        # Positions move over every message taken into account, dead letters too; applying
        # moved them over the events, and the move over the rest is made only where Redis
        # still holds the last event applied (it may have restarted on older data meanwhile).
        last = {m.position.field: m.offset for m in prepared.messages}
        held = {position.field: position.offset for _, _, position in prepared.ready}
        # Where a partition's last message was an event, applying it moved the position
        # there: recording it again would be a no-op, and two round trips a batch.
        moving = {field: offset for field, offset in last.items() if held.get(field) != offset}
        if moving:
            await self.retrying(
                "recording positions",
                lambda: self._writer.advance(moving, into=self._into, held=held),
            )
        return outcomes

    async def _apply(
        self, prepared: Prepared, follows: Mapping[str, int] | None
    ) -> list[AppliedOutcome]:
        outcomes: list[AppliedOutcome] = []
        batch: Sequence[Embedded] = prepared.batch
        generation = prepared.generation
        pending: Sequence[tuple[MemoryEvent, tuple[Memory, ...], Position]] = prepared.ready
        while pending:  # more than once only when a swap retires the generation mid-batch
            applied = await self.retrying(
                "applying to Redis", self._applying(batch, generation, follows)
            )
            outcomes += applied
            pending = pending[len(applied) :]
            if pending:
                self._live = None  # the generation held was retired: read the new one
                generation = await self._target()
                batch = await self._embedded(pending, await self._embedder_for(generation))
        if self._monitor is not None:
            at = datetime.now(UTC)
            for outcome in outcomes:
                for notice in notices_of(outcome, at):
                    self._monitor.announce(notice)
        if self._on_applied is not None:
            for outcome in outcomes:
                if outcome.applied_now:
                    self._on_applied(outcome, prepared.written.get(outcome.event_id))
        return outcomes

    def _applying(
        self, batch: Sequence[Embedded], generation: int, follows: Mapping[str, int] | None
    ) -> Callable[[], Awaitable[list[AppliedOutcome]]]:
        """Applying `batch`, whose vectors were made for `generation`'s model."""
        if self._into is not None:
            return lambda: self._writer.apply(batch, into=self._into, follows=follows)
        return lambda: self._writer.apply(batch, while_live=generation, follows=follows)

    async def _target(self) -> int:
        """The generation this batch goes to: the rebuild's, or the live one, as last read.
        The apply script refuses a generation that is no longer live (`while_live`), and
        `_apply` then reads the new one and embeds again for its model: reading it before
        every batch would cost a round trip a batch to learn of a swap one batch sooner."""
        if self._into is not None:
            return self._into
        if self._live is None:
            self._live = await self.retrying("reading the live generation", self._generations.live)
        return self._live

    async def _embedder_for(self, generation: int) -> Embedder:
        """The embedder of `generation`'s model (the configured one, for a generation that
        has no index yet)."""
        if generation not in self._models:
            model = await self.retrying(
                "reading the generation's model", lambda: self._generations.model(generation)
            )
            wanted = model or self._embedders.configured_model
            # Loading a model reads and compiles its files: not on the event loop.
            self._models[generation] = await asyncio.to_thread(self._embedders.for_model, wanted)
        return self._models[generation]

    async def _embedded(
        self,
        ready: Sequence[tuple[MemoryEvent, tuple[Memory, ...], Position]],
        embedder: Embedder,
    ) -> list[Embedded]:
        """`ready`'s events with their memories embedded by `embedder`, in one call."""
        model = embedder.model_id
        stamped: list[tuple[MemoryEvent, tuple[Memory, ...], Position]] = []
        for event, memories, position in ready:
            # Where the memories came from: the event and this record's place in the log.
            lineage = provenance_of(event, position.topic, position.partition, position.offset)
            stamped.append(
                (
                    event,
                    tuple(replace(m, embedding_model=model, provenance=lineage) for m in memories),
                    position,
                )
            )
        flat = [memory for _, memories, _ in stamped for memory in memories]
        vectors = await self.retrying("embedding", lambda: self._embed(embedder, flat))
        facets = await self.retrying("embedding", lambda: self._embed_facets(embedder, flat))
        batch, row = [], 0
        for event, memories, position in stamped:
            rows = slice(row, row + len(memories))
            batch.append(Embedded(event, memories, vectors[rows], position, tuple(facets[rows])))
            row += len(memories)
        return batch

    async def _decode(self, message: RawMessage) -> MemoryEvent:
        """The message's event. One sealed under a data key the keys topic does not hold yet
        (an agent made it while Kafka was away, and its record is still on the way) is waited
        for, up to `key_wait_s`, before it counts as unreadable."""
        delay, waited = self._first_retry_s, 0.0
        while True:
            try:
                return decode_event(message.value or b"", self._context(message))
            except UnknownDataKeyError as exc:
                if waited >= self._key_wait_s:
                    raise
                log.info("waiting %.1fs for a data key: %s", delay, exc)
                await asyncio.sleep(delay)  # the key's record arrives on another topic
                waited += delay
                delay = min(delay * 2, self._max_retry_s)

    def _context(self, message: RawMessage) -> DecodeContext:
        return worker_context(
            message, self._embedders.configured_model, self._default_importance, self._keyring
        )

    async def _embed(self, embedder: Embedder, memories: list[Memory]) -> Vectors:
        vectors = np.zeros((len(memories), embedder.dims), dtype=np.float32)
        known: list[Vectors | None] = [None] * len(memories)
        if self._reuse_vectors and memories:
            known = await self._writer.known_vectors(memories)
        # Empty content (a store item put with index=False) is never searched by meaning:
        # it keeps a zero vector and costs the embedder nothing.
        missing = [
            row for row, vector in enumerate(known) if vector is None and memories[row].content
        ]
        for row, vector in enumerate(known):
            if vector is not None:
                vectors[row] = vector
        if missing:  # a batch of forgets only, or of known memories, embeds nothing
            texts = [memories[row].content for row in missing]
            vectors[missing] = await asyncio.to_thread(embedder.embed_documents, texts)
        return vectors

    async def _embed_facets(self, embedder: Embedder, memories: list[Memory]) -> list[Vectors]:
        """One matrix per memory of its facets' vectors (no rows: it has none), in one call."""
        texts = [facet for memory in memories for facet in memory.facets]
        flat = np.zeros((len(texts), embedder.dims), dtype=np.float32)
        if texts:
            flat[:] = await asyncio.to_thread(embedder.embed_documents, texts)
        found, row = [], 0
        for memory in memories:
            found.append(flat[row : row + len(memory.facets)])
            row += len(memory.facets)
        return found

    async def retrying(self, doing: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt()`, again with backoff for as long as Redis or the embedder is down (a
        `failing_fast` projector raises Redis's RedisUnavailableError at once)."""
        delay = self._first_retry_s
        while True:
            try:
                return await attempt()
            except InfrastructureError as exc:
                if self._failing_fast and isinstance(exc, RedisUnavailableError):
                    raise
                log.warning("%s failed, retrying in %.1fs: %s", doing, delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_retry_s)


class Preparing(Protocol[P]):
    """A projector in its two steps, `P` what the first hands the second (`Projector` is one,
    with `Prepared`; the live worker's `ShardHealers` another)."""

    async def prepare(self, messages: Sequence[RawMessage]) -> P: ...

    async def commit(self, prepared: P) -> list[AppliedOutcome]: ...


class Overlapping(Generic[P]):
    """Projects batches in order, preparing each (decoding, embedding) while Redis applies the
    one before: Python's work and Redis's then run at once, on a machine of two cores a
    rebuild's largest saving after packing (docs/benchmarks.md). A batch is applied only
    after the one before it has been, so the order of the log is the order of the writes.

    `project` returns once its batch is prepared and handed on; `then` runs once that batch
    is applied. A batch that fails raises at the next `project` or `drain`; `failed`, if
    given, hears of it at once: a caller that waits for its next batch on a quiet log would
    otherwise wait for ever with the failure unseen (the live worker did). Used as a context
    manager: leaving it waits for the last batch, or, when leaving on an error, cancels it
    (the caller's work is then abandoned anyway)."""

    def __init__(
        self,
        projector: Preparing[P],
        failed: Callable[[BaseException], Awaitable[None]] | None = None,
    ) -> None:
        self._projector = projector
        self._failed = failed
        self._in_flight: asyncio.Task[None] | None = None
        self._told: set[asyncio.Task[None]] = set()  # `failed` calls under way

    async def __aenter__(self) -> Overlapping[P]:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            await self.drain()
        elif self._in_flight is not None:
            self._in_flight.cancel()
            with contextlib.suppress(BaseException):
                await self._in_flight
            self._in_flight = None

    async def project(
        self,
        messages: Sequence[RawMessage],
        then: Callable[[list[AppliedOutcome]], Awaitable[None]] | None = None,
    ) -> None:
        prepared = await self._projector.prepare(messages)
        await self.drain()
        self._in_flight = asyncio.create_task(self._commit(prepared, then))
        if self._failed is not None:
            self._in_flight.add_done_callback(self._tell)

    def _tell(self, task: asyncio.Task[None]) -> None:
        if self._failed is None or task.cancelled() or task.exception() is None:
            return
        told = asyncio.ensure_future(self._failed(cast(BaseException, task.exception())))
        self._told.add(told)
        told.add_done_callback(self._told.discard)

    async def drain(self) -> None:
        """Wait until every batch handed on is applied (its error, if it failed)."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            await in_flight

    async def _commit(
        self,
        prepared: P,
        then: Callable[[list[AppliedOutcome]], Awaitable[None]] | None,
    ) -> None:
        outcomes = await self._projector.commit(prepared)
        if then is not None:
            await then(outcomes)


class Projecting(Protocol):
    """What a caller that projects messages one batch at a time needs (dead-letter retry)."""

    @property
    def erased(self) -> int: ...

    async def start(self) -> None: ...

    async def project(self, messages: Sequence[RawMessage]) -> list[AppliedOutcome]: ...


class ShardProjectors:
    """One Projector per projection shard: a message goes to the shard of its partition
    (`shard_of`), so its event and its partition's position land on that shard."""

    def __init__(self, projectors: Sequence[Projector], shard_of: Callable[[int], int]) -> None:
        self._projectors = projectors
        self._shard_of = shard_of

    @property
    def erased(self) -> int:
        return sum(projector.erased for projector in self._projectors)

    async def start(self) -> None:
        for projector in self._projectors:
            await projector.start()

    async def project(self, messages: Sequence[RawMessage]) -> list[AppliedOutcome]:
        by_shard: dict[int, list[RawMessage]] = {}
        for message in messages:
            by_shard.setdefault(self._shard_of(message.partition), []).append(message)
        outcomes: list[AppliedOutcome] = []
        for shard, own in by_shard.items():
            outcomes += await self._projectors[shard].project(own)
        return outcomes


def notices_of(outcome: AppliedOutcome, at: datetime) -> list[TenantNotice]:
    """What to announce about an applied event; nothing for a repeat."""
    if not outcome.applied_now:
        return []
    event = outcome.event
    row = REGISTRY.of(event)
    notices: list[TenantNotice] = []
    if row.applies in (Applies.FORGET, Applies.ERASE):
        notices.append(Forgotten(event.tenant, event.id, outcome.removed, at))
    elif row.applies is Applies.CONSOLIDATE:
        notices.append(
            Consolidated(
                event.tenant,
                event.id,
                row.replaced(event),
                outcome.memory_ids,
                not outcome.skipped,
                outcome.missing,
                at,
            )
        )
    if outcome.evicted:
        notices.append(Evicted(event.tenant, event.id, outcome.evicted, at))
    return notices


def worker_context(
    message: RawMessage, embedding_model: str, importance: float, keyring: Keyring | None
) -> DecodeContext:
    """How the worker reads `message`: what it fills in for fields a producer left out."""
    return DecodeContext(
        key=message.key or b"",  # a message without a key is nobody's: a mismatch
        timestamp=message.timestamp,
        embedding_model=embedding_model,
        importance=importance,
        keyring=keyring,
    )


def _effects(event: MemoryEvent) -> tuple[Memory, ...]:
    """The memories `event` writes, its document changes built too: an event whose effects
    cannot be built fails here, alone, as a dead letter, and not in Redis's apply, where it
    failed its whole batch again on every try and stopped the worker."""
    try:
        row = REGISTRY.of(event)
        if row.applies is Applies.DOCUMENT:
            row.changes(event)
        return memories_of(event)
    except EventDecodeError:
        raise
    except (ValueError, TypeError) as exc:
        raise EventUnusableError(
            f"{type(event).__name__} {event.id} of tenant {event.tenant!r} cannot be applied: {exc}"
        ) from exc


def _where(message: RawMessage) -> tuple[str, int, int]:
    return message.topic, message.partition, message.offset
