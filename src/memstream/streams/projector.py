"""The projector: what the worker does with each batch of messages from the memory topic.

For a batch it decodes every message (an unusable one goes to the dead letters, and the batch
goes on), embeds the memories of all good events in one call, applies each event once to the
Redis projection, and announces what applying did (evictions, forgets, consolidations). The
live worker writes the live generation; a replay runs the same projector `into` the generation
it rebuilds, with its own dead letters and no announcements. It never gives up on a good event:
while Redis or the embedding provider is unreachable it retries with backoff, so the consumer
does not move past events that were not applied (the stream acknowledges a batch only after
`project` returns).

It knows nothing of Faust: the worker module feeds it, and tests can call it directly.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol, TypeVar

import numpy as np
from aiokafka import ConsumerRecord

from memstream.errors import (
    DataKeyErasedError,
    EmbeddingModelMismatchError,
    EventDecodeError,
    InfrastructureError,
    UnknownDataKeyError,
)
from memstream.memory.cipher import Keyring
from memstream.memory.codec import DecodeContext, decode_event
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.events import (
    MemoriesConsolidated,
    MemoryEvent,
    MemoryForgotten,
    TenantErased,
    memories_of,
)
from memstream.memory.model import Memory
from memstream.memory.monitoring import Consolidated, Evicted, Forgotten, Monitor, TenantNotice
from memstream.memory.ports import AppliedOutcome, Embedded, Position, ProjectionWriter

__all__ = ["DeadLetters", "OnApplied", "Projector", "RawMessage", "notices_of", "worker_context"]

log = logging.getLogger(__name__)
T = TypeVar("T")


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
        embedder: Embedder,
        writer: ProjectionWriter,
        dead_letters: DeadLetters,
        *,
        default_importance: float,
        monitor: Monitor | None = None,
        on_applied: OnApplied | None = None,
        into: int | None = None,
        reuse_vectors: bool = False,
        adopt_model: bool = False,
        first_retry_s: float = 0.2,
        max_retry_s: float = 10.0,
        keyring: Keyring | None = None,
        key_wait_s: float = 0.0,
    ) -> None:
        self._embedder = embedder
        self._default_importance = default_importance
        self._writer = writer
        self._dead_letters = dead_letters
        self._monitor = monitor
        self._on_applied = on_applied
        self._into = into
        self._reuse_vectors = reuse_vectors
        # A rebuild with this embedder (replay after MEMSTREAM_EMBEDDER changed) embeds events
        # recorded for another model with this one; the live worker refuses them instead.
        self._adopt_model = adopt_model
        self._first_retry_s = first_retry_s
        self._max_retry_s = max_retry_s
        self._keyring = keyring
        self._key_wait_s = key_wait_s
        # Events sealed under a destroyed data key: skipped, neither applied nor dead-lettered
        # (their content is gone by design, docs/erasure.md), counted here.
        self.erased = 0

    async def start(self) -> None:
        model, dims = self._embedder.model_id, self._embedder.dims
        into = self._into
        await self.retrying(
            "preparing the index",
            lambda: (
                self._writer.ensure_live_index(model, dims)
                if into is None
                else self._writer.ensure_index(model, dims, into)
            ),
        )

    async def project(self, messages: Sequence[RawMessage]) -> list[AppliedOutcome]:
        outcomes, held = await self._project(messages)
        # Positions move over every message taken into account, dead letters too; applying
        # moved them over the events, and the move over the rest is made only where Redis
        # still holds the last event applied (it may have restarted on older data meanwhile).
        last = {m.position.field: m.offset for m in messages}
        await self.retrying(
            "recording positions",
            lambda: self._writer.advance(last, into=self._into, held=held),
        )
        return outcomes

    async def _project(
        self, messages: Sequence[RawMessage]
    ) -> tuple[list[AppliedOutcome], dict[str, int]]:
        """Apply the good events; their outcomes, and the last offset of each partition an
        event was applied (or found applied) at."""
        ready = []
        written: dict[str, datetime | None] = {}
        for message in messages:
            try:
                event = await self._decode(message)
                if isinstance(event, TenantErased) and self._keyring is not None:
                    # Events after the erasure sealed under its keys (a producer that had
                    # not yet heard of it) are erased too, whatever the keys topic says yet.
                    self._keyring.forget(event.tenant, event.key_ids)
                memories = memories_of(event)
                foreign = {m.embedding_model for m in memories} - {self._embedder.model_id}
                if foreign and self._adopt_model:
                    model = self._embedder.model_id
                    memories = tuple(replace(m, embedding_model=model) for m in memories)
                elif foreign:
                    raise EmbeddingModelMismatchError(
                        f"the event was recorded for {foreign.pop()!r}, this worker embeds "
                        f"with {self._embedder.model_id!r}; run a worker with that model (or "
                        "replay into a namespace built with it)"
                    )
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
            return [], {}
        flat = [memory for _, memories, _ in ready for memory in memories]
        vectors = await self.retrying("embedding", lambda: self._embed(flat))
        batch, row = [], 0
        for event, memories, position in ready:
            batch.append(Embedded(event, memories, vectors[row : row + len(memories)], position))
            row += len(memories)
        outcomes = await self.retrying(
            "applying to Redis", lambda: self._writer.apply(batch, into=self._into)
        )
        if self._monitor is not None:
            at = datetime.now(UTC)
            for outcome in outcomes:
                for notice in notices_of(outcome, at):
                    self._monitor.announce(notice)
        if self._on_applied is not None:
            for outcome in outcomes:
                if outcome.applied_now:
                    self._on_applied(outcome, written.get(outcome.event_id))
        return outcomes, {position.field: position.offset for _, _, position in ready}

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
            message, self._embedder.model_id, self._default_importance, self._keyring
        )

    async def _embed(self, memories: list[Memory]) -> Vectors:
        vectors = np.zeros((len(memories), self._embedder.dims), dtype=np.float32)
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
            vectors[missing] = await asyncio.to_thread(self._embedder.embed_documents, texts)
        return vectors

    async def retrying(self, doing: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt()`, again with backoff for as long as Redis or the embedder is down."""
        delay = self._first_retry_s
        while True:
            try:
                return await attempt()
            except InfrastructureError as exc:
                log.warning("%s failed, retrying in %.1fs: %s", doing, delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_retry_s)


def notices_of(outcome: AppliedOutcome, at: datetime) -> list[TenantNotice]:
    """What to announce about an applied event; nothing for a repeat."""
    if not outcome.applied_now:
        return []
    event = outcome.event
    notices: list[TenantNotice] = []
    if isinstance(event, MemoryForgotten | TenantErased):
        notices.append(Forgotten(event.tenant, event.id, outcome.removed, at))
    elif isinstance(event, MemoriesConsolidated):
        notices.append(
            Consolidated(
                event.tenant,
                event.id,
                event.memory_ids,
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


def _where(message: RawMessage) -> tuple[str, int, int]:
    return message.topic, message.partition, message.offset
