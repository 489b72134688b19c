"""One tenant's events read back from the memory log, in log order, with their positions.

The log holds every tenant's records in its partition, keyed by tenant: this reads the
tenant's partition from the start to its end when the read began, skips other tenants'
records by key before decoding, and decodes the tenant's as the worker does (sealed ones with
the keyring; one sealed under an erased key, or otherwise unreadable, is skipped: what the
projection never applied is no lineage).
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from memstream.errors import EventDecodeError, KafkaUnavailableError
from memstream.memory.cipher import Keyring
from memstream.memory.codec import decode_event
from memstream.memory.events import MemoryEvent
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import RawMessage, worker_context
from memstream.streams.replay import reached_ends

__all__ = ["LoggedEvent", "tenant_events"]

LoggedEvent = tuple[MemoryEvent, str, int, int]  # the event, its topic, partition and offset


async def tenant_events(
    kafka: KafkaConnection,
    topic: str,
    partition: int,
    tenant: str,
    *,
    keyring: Keyring | None,
    embedding_model: str,
    importance: float,
) -> list[LoggedEvent]:
    """`tenant`'s readable events in `topic`'s `partition` (the tenant's), in log order."""
    key = tenant.encode()
    consumer = AIOKafkaConsumer(**kafka.aiokafka(), group_id=None, enable_auto_commit=False)
    where = TopicPartition(topic, partition)
    found: list[LoggedEvent] = []
    try:
        await consumer.start()
        consumer.assign([where])
        await consumer.seek_to_beginning(where)
        ends = await consumer.end_offsets([where])
        while not await reached_ends(consumer, ends):
            batches = await consumer.getmany(where, timeout_ms=500, max_records=2048)
            for record in batches.get(where, ()):
                if record.key != key or record.offset >= ends[where]:
                    continue
                message = RawMessage.of(record)
                context = worker_context(message, embedding_model, importance, keyring)
                try:
                    event = decode_event(message.value or b"", context)
                except EventDecodeError:
                    continue
                found.append((event, record.topic, record.partition, record.offset))
    except KafkaError as exc:
        raise KafkaUnavailableError(
            f"could not read {topic} from Kafka at {kafka.where}: {await kafka.explain(exc)}; "
            "check the broker (`memstream status`) and MEMSTREAM_KAFKA_BOOTSTRAP"
        ) from exc
    finally:
        await consumer.stop()
    return found
