"""The extraction job: derives memories from recorded turns with a chat model, off the hot path.

What does the job do?
    It reads the memory topic in a consumer group of its own (`<worker group>.extract`), so
    however slow the model is, recording, recall and the projection never wait for it. For
    each turn or message of a tenant it extracts for (MEMSTREAM_EXTRACTION_TENANTS), it waits
    until the projection has applied the turn, checks that the turn was not extracted this
    way already and that its memories are still held, asks the model (memory.extraction), and
    writes the answer to the memory topic as one MemoriesExtracted, keyed by the tenant. The
    projection applies that like any write; a replay, a reshard or a re-embedding reads it
    from the log and never asks a model again.

Why can it never extract a turn twice?
    The event's id is the turn's, the strategy's, the prompt version's and the model's, and
    it is known before the model is asked: a turn read again (a redelivery after a crash, a
    rebalance, a duplicate in the log) finds its extraction applied and is skipped, and two
    answers racing for one turn are one event to apply-once.

What happens when the model fails?
    Busy and failing answers are retried by the provider with backoff; when it still fails,
    the job waits and asks again, holding only that turn (its partition's committed offset
    stays before it; other turns and tenants go on, up to MEMSTREAM_EXTRACTION_CONCURRENCY
    calls at once). A turn the model refuses (a final 4xx) or answers without the JSON asked
    for, twice, becomes a dead letter with its own code (`model_refused`,
    `extraction_output`), and the job goes on.

It commits a partition's offset up to the first message still being worked on, so a crash
re-reads at most what was in flight, and skips it as extracted where it was.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime

from memstream.errors import (
    DataKeyErasedError,
    EventDecodeError,
    ExtractionOutputError,
    MemstreamError,
    ModelProviderError,
    ModelRefusedError,
    UnknownDataKeyError,
)
from memstream.llm import ModelClient
from memstream.memory.cipher import Keyring
from memstream.memory.codec import decode_event
from memstream.memory.events import MemoriesExtracted
from memstream.memory.extraction import Extracting, Source, extract, source_of
from memstream.memory.monitoring import ModelUsage, Monitor, Skipped
from memstream.memory.ports import EventRef, MemoryLookup, ProjectionProgress, TokenLedger
from memstream.memory.tenancy import TenantId
from memstream.streams.follower import LogFollower, until_applied
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import RawMessage, worker_context

__all__ = [
    "ExtractionJob",
    "ExtractionOutlets",
    "ExtractionParts",
    "extraction_spent",
    "purpose",
]

log = logging.getLogger(__name__)

Send = Callable[[MemoriesExtracted], Awaitable[None]]
DeadLetter = Callable[[RawMessage, MemstreamError], Awaitable[None]]

_RETRY_FIRST_S, _RETRY_MAX_S = 1.0, 60.0


@dataclass(frozen=True, slots=True)
class ExtractionParts:
    """What the deployment configures: the chat model (and its name), the tenants it extracts
    for and how (`tenants`: tenant, or "*" for every other one, -> its way of extracting),
    the projection it checks, the ledger of tokens spent and each tenant's daily budget, and
    how many calls at once."""

    client: ModelClient
    model: str
    tenants: Mapping[str, Extracting]
    progress: ProjectionProgress
    lookup: MemoryLookup
    ledger: TokenLedger
    daily_tokens: int = 0  # per tenant and UTC day; 0: no limit
    concurrency: int = 2

    def how_for(self, key: bytes | None) -> Extracting | None:
        """How the tenant keyed `key` is extracted; None: it is not."""
        tenant = key.decode("utf-8", "replace") if key is not None else None
        if tenant is not None and tenant in self.tenants:
            return self.tenants[tenant]
        return self.tenants.get("*")


def purpose(how: Extracting) -> str:
    """What an extraction's model calls are for, as usage and the ledger count them."""
    return f"extraction:{how.strategy}"


def extraction_spent(ledger: TokenLedger, day: date, tenant: TenantId) -> int:
    """The tokens `tenant`'s extractions spent on `day`, all strategies: what its daily
    budget (MEMSTREAM_EXTRACTION_DAILY_TOKENS) is held against."""
    spent = ledger.spent(day, tenant)
    return sum(t for (_, used_for), t in spent.items() if used_for.startswith("extraction"))


@dataclass(frozen=True, slots=True)
class ExtractionOutlets:
    """What the worker gives the job: where its events and dead letters go, its monitor,
    and how it reads events (their keyring, the fields a producer may leave out)."""

    send: Send
    dead_letter: DeadLetter
    monitor: Monitor
    keyring: Keyring | None
    embedding_model: str
    default_importance: float
    max_chars: int


class ExtractionJob:
    def __init__(
        self,
        kafka: KafkaConnection,
        topic: str,
        group: str,
        parts: ExtractionParts,
        outlets: ExtractionOutlets,
    ) -> None:
        self._kafka = kafka
        self._topic = topic
        self._group = group
        self._parts = parts
        self._out = outlets
        self._calls = asyncio.Semaphore(parts.concurrency)

    async def run(self) -> None:
        """Extract until cancelled (streams.follower: its own consumer group, commits that
        never pass a turn still being extracted)."""
        ways = {tenant: str(how.strategy) for tenant, how in self._parts.tenants.items()}
        log.info("extraction (%s, %s) reading %s", ways, self._parts.model, self._topic)
        await LogFollower(self._kafka, self._topic, self._group, self.handle,
                          name="extraction").run()  # fmt: skip

    async def handle(self, message: RawMessage) -> MemoriesExtracted | None:
        """Extract what `message` recorded, if it is a turn this job extracts and nobody has;
        the event written (None: nothing to do, or a dead letter)."""
        parts = self._parts
        how = parts.how_for(message.key)
        if how is None:
            return None
        source = await self._source(message)
        if source is None:
            return None
        how = source.asks or how  # a working-memory session's own strategy
        if not await self._due(source, how):
            return None
        if await self._over_budget(source):
            return None
        delay = _RETRY_FIRST_S
        while True:
            try:
                async with self._calls:
                    event = await asyncio.to_thread(self._extract, source, how)
                break
            except (ModelRefusedError, ExtractionOutputError) as exc:
                log.warning("extraction of %s set aside: %s", source.event_id, exc)
                await self._out.dead_letter(message, exc)
                return None
            except ModelProviderError as exc:
                log.warning("extraction of %s waits %.0fs for the model: %s", source.event_id,
                            delay, exc)  # fmt: skip
                await asyncio.sleep(delay)  # the provider retried already: an outage
                delay = min(delay * 2, _RETRY_MAX_S)
        await self._out.send(event)
        tokens = event.input_tokens + event.output_tokens
        today = event.extracted_at.date()
        await asyncio.to_thread(parts.ledger.spend, today, source.tenant, purpose(how), tokens)
        self._out.monitor.announce(
            ModelUsage(
                tenant=source.tenant,
                thread=source.thread,
                purpose=purpose(how),
                calls=1,
                input_tokens=event.input_tokens,
                output_tokens=event.output_tokens,
                at=event.extracted_at,
            )
        )
        log.info("extracted %d memories of %s (tenant %r)", len(event.facts), source.event_id,
                 source.tenant)  # fmt: skip
        return event

    async def _source(self, message: RawMessage) -> Source | None:
        out = self._out
        context = worker_context(message, out.embedding_model, out.default_importance,
                                 out.keyring)  # fmt: skip
        try:
            event = decode_event(message.value or b"", context)
        except (DataKeyErasedError, UnknownDataKeyError):
            return None  # erased (nothing to derive), or the projector's to wait for and report
        except EventDecodeError:
            return None  # the projector dead-letters it
        return source_of(event)

    async def _over_budget(self, source: Source) -> bool:
        """Whether the tenant spent its day's tokens on extraction already: then the turn is
        not extracted, and a Skipped says so. (Calls in flight may each overrun it once.)"""
        budget = self._parts.daily_tokens
        if not budget:
            return False
        today = datetime.now(UTC)
        total = await asyncio.to_thread(
            extraction_spent, self._parts.ledger, today.date(), source.tenant
        )
        if total < budget:
            return False
        self._out.monitor.announce(
            Skipped(
                tenant=source.tenant,
                thread=source.thread,
                run_id=source.run,
                stage="extract",
                code="budget_exhausted",
                reason=f"extraction spent {total} tokens of tenant {source.tenant!r} today, "
                f"MEMSTREAM_EXTRACTION_DAILY_TOKENS={budget}: turn {source.event_id} is not "
                "extracted (reextract it later, or raise the budget)",
                at=today,
            )
        )
        return True

    async def _due(self, source: Source, how: Extracting) -> bool:
        """Whether `source` still needs extracting: applied by the projection, not extracted
        this way yet, and some of its memories still held (one forgotten, evicted or erased
        has nothing left to derive from)."""
        parts = self._parts
        await until_applied(parts.progress, EventRef(source.tenant, source.event_id), "extraction")
        done = EventRef(
            source.tenant, how.extraction_id(source.tenant, source.event_id, parts.model)
        )
        if not await asyncio.to_thread(parts.progress.unapplied, [done]):
            return False
        held = await asyncio.to_thread(
            parts.lookup.memories_by_id, source.tenant, source.memory_ids
        )
        return any(memory is not None for memory in held)

    def _extract(self, source: Source, how: Extracting) -> MemoriesExtracted:
        parts = self._parts
        return extract(
            source,
            parts.client,
            how,
            model=parts.model,
            embedding_model=self._out.embedding_model,
            max_chars=self._out.max_chars,
            now=datetime.now(UTC),
        )
