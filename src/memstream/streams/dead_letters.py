"""The dead-letters topic: what the projector refused, listed, and re-driven once fixed.

A dead letter is the refused message byte for byte (or, from the extraction job, a turn a model
could not answer), with headers saying why (the error's code
and reason) and where it came from (its topic/partition/offset and record time). Nothing is
ever deleted from the topic. A retry appends a resolution record for each letter it re-drove
(an empty value; `memstream-resolves` names the letter's offset, `memstream-outcome` what
happened), so the topic itself says which letters are still pending, to whoever reads it.

`DeadLetterRetry` runs the worker's Projector over the letters' original bytes, into the live
generation, one letter at a time; apply-once makes it idempotent: a letter whose event was
applied meanwhile (by a replay, or an earlier retry) is found applied, not applied twice. One
that fails again is dead-lettered anew, with its new reason and `memstream-retry-of` naming the
old letter, which is resolved as `failed`. Each outcome is announced on the monitoring topic
(`DeadLetterRetried`). An extraction's letter is not projected again but `redriven`: its turn
goes back on the memory topic for the extraction job (`EXTRACTION_CODES`).

A retried event is applied when the retry runs, after the events that followed it in the log.
Where one of those would have touched its memories (a forget by thread or by time), `memstream
replay` puts it in its place: the rebuild reads it where the log holds it.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from memstream.errors import (
    EventDecodeError,
    ExtractionOutputError,
    KafkaUnavailableError,
    MemstreamError,
    ModelRefusedError,
)
from memstream.memory.monitoring import DeadLetterRetried, Monitor, MonitoringEvent
from memstream.memory.tenancy import tenant_key
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import DeadLetters, Projecting, RawMessage
from memstream.streams.topics import Topics, topic_partitions
from memstream.streams.wire import Record, monitoring_record, producer_config, send

__all__ = [
    "EXTRACTION_CODES",
    "DeadLetter",
    "DeadLetterLog",
    "DeadLetterRetry",
    "Outcome",
    "Retried",
    "dead_letter_headers",
    "read_dead_letters",
]

CODE = "memstream-error-code"
REASON = "memstream-error"
SOURCE = "memstream-source"  # topic/partition/offset of the refused message
SOURCE_TIME = "memstream-source-timestamp"  # its record time, ms (absent before 0.4)
RESOLVES = "memstream-resolves"  # on a resolution record: the letter's offset
OUTCOME = "memstream-outcome"
RETRY_OF = "memstream-retry-of"  # on a letter that failed again: the old letter's offset


class Outcome(enum.StrEnum):
    """What retrying a letter did."""

    APPLIED = "applied"
    ALREADY_APPLIED = "already_applied"  # applied meanwhile (a replay, an earlier retry)
    FAILED = "failed"  # refused again: a new letter holds its new reason
    ERASED = "erased"  # sealed under a key an erasure destroyed: gone by design
    REDRIVEN = "redriven"  # an extraction's letter: its turn handed back to the job


# Letters of the extraction job (streams.extraction): their turn was applied, a model could not
# answer it. A retry writes the turn to the memory topic again, where the projection skips it
# as applied and the job, finding no extraction of it, asks the model once more.
EXTRACTION_CODES = frozenset({ExtractionOutputError.code, ModelRefusedError.code})


def dead_letter_headers(
    message: RawMessage, error: MemstreamError
) -> tuple[tuple[str, bytes], ...]:
    """The headers a dead letter of `message` carries: why, and where it came from."""
    headers = {
        CODE: error.code.encode(),
        REASON: str(error).encode("utf-8"),
        SOURCE: f"{message.topic}/{message.partition}/{message.offset}".encode(),
    }
    if message.timestamp is not None:
        headers[SOURCE_TIME] = str(round(message.timestamp.timestamp() * 1000)).encode()
    return tuple(headers.items())


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One letter: its offset in the dead-letters topic, why, whose (the message's key as
    text: a key that names no valid tenant may be why it is here), and the message."""

    offset: int
    code: str
    reason: str
    tenant: str
    at: datetime  # when it was dead-lettered
    message: RawMessage  # the refused message, as the projector read it (never printed)

    @property
    def source(self) -> str:
        m = self.message
        return f"{m.topic}/{m.partition}/{m.offset}"


@dataclass(frozen=True, slots=True)
class DeadLetterLog:
    """The dead-letters topic as read: every letter, and which ones a retry resolved."""

    letters: tuple[DeadLetter, ...]
    resolved: Mapping[int, str]  # letter offset -> outcome

    def matching(
        self, *, code: str | None = None, tenant: str | None = None, resolved: bool = False
    ) -> list[DeadLetter]:
        """The letters of `code` and `tenant` (each if given): the pending ones, or with
        `resolved` those a retry resolved too."""
        return [
            letter
            for letter in self.letters
            if (resolved or letter.offset not in self.resolved)
            and (code is None or letter.code == code)
            and (tenant is None or letter.message.key == tenant_key(tenant))
        ]

    def pending(self, *, code: str | None = None, tenant: str | None = None) -> list[DeadLetter]:
        """The letters no retry has resolved, those of `code` and `tenant` if given."""
        return self.matching(code=code, tenant=tenant)

    def pending_by_code(self) -> dict[str, int]:
        return dict(sorted(Counter(letter.code for letter in self.pending()).items()))


def _letter(record: ConsumerRecord[bytes | None, bytes | None]) -> DeadLetter:
    headers = {name: value.decode("utf-8", "replace") for name, value in record.headers}
    source_topic, partition, offset = _source(headers.get(SOURCE, ""))
    at = datetime.fromtimestamp(record.timestamp / 1000, UTC)
    # Letters written before the source's time was kept: the letter's time is close to it.
    source_ms = headers.get(SOURCE_TIME)
    written = datetime.fromtimestamp(int(source_ms) / 1000, UTC) if source_ms else at
    return DeadLetter(
        offset=record.offset,
        code=headers.get(CODE, ""),
        reason=headers.get(REASON, ""),
        tenant=(record.key or b"").decode("utf-8", "replace"),
        at=at,
        message=RawMessage(source_topic, partition, offset, record.key, record.value, written),
    )


def _source(text: str) -> tuple[str, int, int]:
    topic, _, numbers = text.partition("/")
    partition, _, offset = numbers.partition("/")
    try:
        return topic, int(partition), int(offset)
    except ValueError:
        return topic, -1, -1


async def read_dead_letters(kafka: KafkaConnection, topics: Topics) -> DeadLetterLog:
    """Every record of the dead-letters topic, from its start to its end now (none before a
    worker or an import created the namespace's topics)."""
    letters: list[DeadLetter] = []
    resolved: dict[int, str] = {}
    if not await topic_partitions(kafka, topics.dead_letters):
        return DeadLetterLog((), {})
    consumer = AIOKafkaConsumer(**kafka.aiokafka(), group_id=None, enable_auto_commit=False)
    partition = TopicPartition(topics.dead_letters, 0)
    try:
        await consumer.start()
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        end = (await consumer.end_offsets([partition]))[partition]
        while await consumer.position(partition) < end:
            for records in (await consumer.getmany(partition, timeout_ms=500)).values():
                for record in records:
                    headers = dict(record.headers)
                    if RESOLVES in headers:
                        offset = int(headers[RESOLVES].decode())
                        resolved[offset] = headers.get(OUTCOME, b"").decode()
                    else:
                        letters.append(_letter(record))
    except KafkaError as exc:
        raise KafkaUnavailableError(
            f"could not read the dead letters from Kafka at {kafka.where}: "
            f"{await kafka.explain(exc)}. Check the broker (`memstream status`) and "
            "MEMSTREAM_KAFKA_BOOTSTRAP."
        ) from exc
    finally:
        await consumer.stop()
    return DeadLetterLog(tuple(letters), resolved)


@dataclass(frozen=True, slots=True)
class Retried:
    letter: DeadLetter
    outcome: Outcome
    new_code: str = ""
    new_reason: str = ""


class _Refusals:
    """The retry's DeadLetters port: what the projector refused again, kept for the caller."""

    def __init__(self) -> None:
        self.errors: list[EventDecodeError] = []

    async def send(self, message: RawMessage, error: EventDecodeError) -> None:
        self.errors.append(error)


class _Notices:
    """The retry's Monitor port: notices of what retried events did, sent after each one."""

    def __init__(self) -> None:
        self.events: list[MonitoringEvent] = []

    def announce(self, event: MonitoringEvent) -> None:
        self.events.append(event)


class DeadLetterRetry:
    """Re-drives dead letters through a projector the caller builds over the ports it is
    given (`projector(dead_letters, monitor)`: the worker's parts, writing the live
    generation of each shard), and records each outcome."""

    def __init__(
        self,
        kafka: KafkaConnection,
        topics: Topics,
        projector: Callable[[DeadLetters, Monitor], Projecting],
        *,
        counted: Monitor | None = None,
    ) -> None:
        self._kafka = kafka
        self._counted = counted
        self._topics = topics
        self._refusals = _Refusals()
        self._notices = _Notices()
        self._projector = projector(self._refusals, self._notices)
        self._producer = AIOKafkaProducer(**producer_config(kafka, "aiokafka"))

    async def __aenter__(self) -> DeadLetterRetry:
        try:
            await self._producer.start()
        except KafkaError as exc:
            await self._producer.stop()
            raise self._unavailable(await self._kafka.explain(exc)) from exc
        await self._projector.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._producer.stop()

    async def retry(self, letters: Sequence[DeadLetter]) -> list[Retried]:
        """Project each letter's message again, in the order they were dead-lettered."""
        done = []
        for letter in letters:
            retried = await self._one(letter)
            await self._record(retried)
            done.append(retried)
        return done

    async def _one(self, letter: DeadLetter) -> Retried:
        if letter.code in EXTRACTION_CODES:
            message = letter.message
            await self._send(Record(message.topic, message.key, message.value, ()))
            return Retried(letter, Outcome.REDRIVEN)
        self._refusals.errors.clear()
        erased = self._projector.erased
        outcomes = await self._projector.project([letter.message])
        if self._refusals.errors:
            error = self._refusals.errors[-1]
            return Retried(letter, Outcome.FAILED, error.code, str(error))
        if self._projector.erased > erased:
            return Retried(letter, Outcome.ERASED)
        applied = any(o.applied_now for o in outcomes)
        return Retried(letter, Outcome.APPLIED if applied else Outcome.ALREADY_APPLIED)

    async def _record(self, retried: Retried) -> None:
        """The new letter of a failure, then the old letter's resolution, then the notices:
        each durable before the next letter is tried."""
        letter, at = retried.letter, datetime.now(UTC)
        topic = self._topics.dead_letters
        try:
            if retried.outcome == Outcome.FAILED:
                headers = {
                    CODE: retried.new_code.encode(),
                    REASON: retried.new_reason.encode("utf-8"),
                    SOURCE: letter.source.encode(),
                    RETRY_OF: str(letter.offset).encode(),
                }
                if letter.message.timestamp is not None:
                    ms = round(letter.message.timestamp.timestamp() * 1000)
                    headers[SOURCE_TIME] = str(ms).encode()
                await self._send(
                    Record(topic, letter.message.key, letter.message.value, tuple(headers.items()))
                )
            resolution = (
                (RESOLVES, str(letter.offset).encode()),
                (OUTCOME, retried.outcome.encode()),
            )
            await self._send(Record(topic, letter.message.key, b"", resolution))
            notice = DeadLetterRetried(
                source_topic=letter.message.topic,
                partition=letter.message.partition,
                offset=letter.message.offset,
                letter_offset=letter.offset,
                code=letter.code,
                outcome=retried.outcome,
                new_code=retried.new_code,
                at=at,
            )
            for event in [*self._notices.events, notice]:
                if self._counted is not None:
                    self._counted.announce(event)
                await self._send(monitoring_record(self._topics, event))
            self._notices.events.clear()
        except KafkaError as exc:
            raise self._unavailable(await self._kafka.explain(exc)) from exc

    async def _send(self, record: Record) -> None:
        await asyncio.wait_for(await send(self._producer, record), 30.0)

    def _unavailable(self, explained: str) -> KafkaUnavailableError:
        return KafkaUnavailableError(
            f"could not write to Kafka at {self._kafka.where}: {explained}. The letters "
            "retried so far are recorded; run the retry again once the broker answers "
            "(a letter applied but not yet recorded is found applied, not applied twice)."
        )
