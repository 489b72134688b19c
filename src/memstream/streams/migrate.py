"""Sealing an old log: copy a namespace's memory topic into another namespace, every event
sealed under its tenant's data key (`memstream erasure encrypt --to NS`, docs/erasure.md).

The log is kept forever and Kafka cannot rewrite a record in place, so a log written in
plaintext (before encryption, or with MEMSTREAM_ENCRYPTION=off) becomes erasable only as a
copy: each event is read as the worker reads it (fields the producer left out filled in the
same way), written again sealed, keyed by tenant, in the same order per partition. Event ids
do not change (they derive from the plaintext), so the copy's projection — built by the new
namespace's worker or `memstream replay` — equals the old one. Events already sealed are
re-sealed under the same tenant's key. A message that is no event is not copied: it is in the
old namespace's dead letters already; the copy refuses to finish unless allowed to drop them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError

from memstream.errors import EventDecodeError, KafkaUnavailableError, ReplayError
from memstream.memory.cipher import Keyring
from memstream.memory.codec import decode_event
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import RawMessage, worker_context
from memstream.streams.replay import reached_ends
from memstream.streams.topics import Topics, topic_partitions
from memstream.streams.wire import event_record, producer_config, send

__all__ = ["Sealed", "seal_copy"]


@dataclass(frozen=True, slots=True)
class Sealed:
    """What a sealing copy did: events copied, messages left out by reason, time taken."""

    copied: int
    unreadable: dict[str, int]
    elapsed_s: float


def _clients(kafka: KafkaConnection) -> tuple[AIOKafkaConsumer, AIOKafkaProducer]:
    """The copy's Kafka clients: a group-less reader from the start, an idempotent writer."""
    consumer = AIOKafkaConsumer(
        **kafka.aiokafka(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(**producer_config(kafka, "aiokafka", {"linger_ms": 5}))
    return consumer, producer


async def seal_copy(
    kafka: KafkaConnection,
    source: Topics,
    target: Topics,
    *,
    sealer: Keyring,
    opener: Keyring | None,
    embedding_model: str,
    default_importance: float,
    allow_unreadable: bool = False,
    progress: Callable[[int], None] = lambda _: None,
) -> Sealed:
    """Copy `source`'s memory topic, sealed by `sealer`, to `target`'s (created beforehand by
    the caller). Each message is decoded as the worker would (`opener` opens sealed ones)."""
    if source.memory == target.memory:
        raise ReplayError("the sealed copy must go to another namespace than the one it reads")
    started = time.monotonic()
    consumer, producer = _clients(kafka)
    copied, unreadable = 0, Counter[str]()
    try:
        partitions = await topic_partitions(kafka, source.memory)
        if not partitions:
            raise ReplayError(f"the memory topic {source.memory} does not exist; nothing to copy")
        await consumer.start()
        await producer.start()
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        end_of = {tp.partition: end for tp, end in ends.items()}
        pending = []
        while not await reached_ends(consumer, ends):
            batches = await consumer.getmany(timeout_ms=500, max_records=512)
            for records in batches.values():
                for record in records:
                    if record.offset >= end_of[record.partition]:
                        continue  # written after the copy began: the operator stops writers
                    message = RawMessage.of(record)
                    try:
                        context = worker_context(
                            message, embedding_model, default_importance, opener
                        )
                        event = decode_event(message.value or b"", context)
                    except EventDecodeError as exc:
                        unreadable[exc.code] += 1
                        continue
                    pending.append(await send(producer, event_record(target, event, sealer)))
                    copied += 1
            for sent in pending:
                await sent
            pending.clear()
            progress(copied)
        await producer.flush()
    except KafkaError as exc:
        raise KafkaUnavailableError(
            f"could not copy {source.memory} to {target.memory} on Kafka at {kafka.where}: "
            f"{exc!r}; the copy is incomplete: delete {target.memory} and run it again"
        ) from exc
    finally:
        await consumer.stop()
        await producer.stop()
    if unreadable and not allow_unreadable:
        reasons = ", ".join(f"{n} {code}" for code, n in sorted(unreadable.items()))
        raise ReplayError(
            f"{unreadable.total()} messages of {source.memory} are no readable event ({reasons}) "
            f"and were not copied to {target.memory} ({copied} events were); they are in "
            f"{source.dead_letters}. Run again with --allow-dead-letters to accept that."
        )
    return Sealed(copied, dict(unreadable), time.monotonic() - started)
