"""The one wire path into Kafka: what each record memstream writes holds (topic, key, value,
headers), how every producer is configured, and so which partition a tenant's records land on.

Every producer — the agent side's background publisher, the awaited publisher (server,
importer, CLI), the sealing copy, the keys topic's producer, the worker's summaries and
notices — writes records built here and takes its settings from `producer_config`, so no
producer can forget idempotence, acks=all or the partitioner. The partitioner is murmur2 (the
Java client's, aiokafka's default), over the tenant's key: all of a tenant's events and
notices land on one partition, in the order they were written, whoever produced them — what
makes a replay equal the live projection. `partition_of` is the same function, said once, for
whoever must know where a tenant lives (verify, the scaling bench, the projection's routing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import murmur2
from aiokafka.structs import RecordMetadata

from memstream.memory.cipher import Keyring
from memstream.memory.codec import encode_event
from memstream.memory.events import MemoryEvent
from memstream.memory.monitoring import MonitoringEvent, encode_monitoring, monitoring_key
from memstream.memory.tenancy import tenant_key
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import Topics

__all__ = [
    "Record",
    "event_record",
    "monitoring_record",
    "partition_of",
    "producer_config",
    "send",
]

Dialect = Literal["librdkafka", "aiokafka"]

# What every producer must have; a producer's own settings may not override these.
_LIBRDKAFKA: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    # librdkafka's default (CRC32) would put a tenant's turns on one partition and the
    # worker's summaries of them (aiokafka: murmur2) on another.
    "partitioner": "murmur2_random",
}
# aiokafka's partitioner is murmur2 already (DefaultPartitioner), and only that one is used.
_AIOKAFKA: dict[str, Any] = {"enable_idempotence": True, "acks": "all"}


@dataclass(frozen=True, slots=True)
class Record:
    """One Kafka record as any producer sends it."""

    topic: str
    key: bytes | None
    value: bytes | None  # None: a tombstone (or a dead letter of an empty message)
    headers: tuple[tuple[str, bytes], ...] = ()


def event_record(topics: Topics, event: MemoryEvent, keyring: Keyring | None = None) -> Record:
    """A memory event's record: keyed by its tenant, sealed when given a keyring."""
    return Record(topics.memory, tenant_key(event.tenant), encode_event(event, keyring))


def monitoring_record(topics: Topics, event: MonitoringEvent, key: bytes | None = None) -> Record:
    """A notice's record on the monitoring topic, keyed by its tenant (`key`, when given,
    instead: a dead letter's notice carries the key its message came with)."""
    key = monitoring_key(event) if key is None else key
    return Record(topics.monitoring, key, encode_monitoring(event))


def partition_of(tenant: str, partitions: int) -> int:
    """The partition of `partitions` that every memstream producer writes `tenant`'s records
    to (murmur2 of the tenant key, as Kafka's Java client and librdkafka's murmur2_random)."""
    return int(murmur2(tenant_key(tenant)) & 0x7FFFFFFF) % partitions


def producer_config(
    kafka: KafkaConnection, dialect: Dialect, own: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A producer's configuration in `dialect`: the connection, idempotence, acks=all and the
    murmur2 partitioner, then the producer's `own` settings (linger, buffering, callbacks)."""
    required = _LIBRDKAFKA if dialect == "librdkafka" else _AIOKAFKA
    own = dict(own or {})
    clash = sorted(set(own) & set(required))
    if clash:
        raise ValueError(f"a producer may not set {', '.join(clash)}: every producer has them")
    connection = kafka.librdkafka() if dialect == "librdkafka" else kafka.aiokafka()
    return connection | required | own


async def send(producer: AIOKafkaProducer, record: Record) -> asyncio.Future[RecordMetadata]:
    """Hand `record` to an aiokafka producer; await the returned future for its
    acknowledgement."""
    sent: asyncio.Future[RecordMetadata] = await producer.send(
        record.topic, record.value, key=record.key, headers=list(record.headers) or None
    )
    return sent
