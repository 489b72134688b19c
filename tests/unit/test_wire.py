"""The one wire path into Kafka: an event's record, every producer's settings, a tenant's
partition."""

from __future__ import annotations

import pytest
from aiokafka.partitioner import DefaultPartitioner

from memstream import DecodeContext, decode_event
from memstream.memory.cipher import InProcessKeyring
from memstream.memory.monitoring import DeadLettered, Skipped, encode_monitoring
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import Topics
from memstream.streams.wire import event_record, monitoring_record, partition_of, producer_config

from .test_events import AT, turn

TOPICS = Topics("wire-unit")
KAFKA = KafkaConnection("broker:9092", "SASL_PLAINTEXT", "PLAIN", "agent", "s3cret")


def test_an_events_record_is_keyed_by_its_tenant_on_the_memory_topic() -> None:
    event = turn(tenant="Ünïcode tenant")
    record = event_record(TOPICS, event)
    assert record.topic == TOPICS.memory
    assert record.key == "Ünïcode tenant".encode()
    assert record.headers == ()
    assert record.value is not None
    assert decode_event(record.value, DecodeContext(key=record.key)) == event


def test_a_sealed_events_record_hides_its_content_and_opens_with_the_keyring() -> None:
    keyring = InProcessKeyring()
    event = turn()
    record = event_record(TOPICS, event, keyring)
    assert record.value is not None
    assert b"To eu-west." not in record.value
    assert record.key == b"acme"
    assert decode_event(record.value, DecodeContext(key=b"acme", keyring=keyring)) == event


def test_a_notices_record_is_keyed_by_its_tenant_and_a_dead_letters_by_its_message() -> None:
    notice = Skipped(
        tenant="acme", thread="t", run_id="r", stage="record", code="c", reason="why", at=AT
    )
    record = monitoring_record(TOPICS, notice)
    assert (record.topic, record.key, record.value) == (
        TOPICS.monitoring,
        b"acme",
        encode_monitoring(notice),
    )
    dead = DeadLettered(source_topic="t", partition=0, offset=1, code="c", reason="r", at=AT)
    assert monitoring_record(TOPICS, dead).key is None
    assert monitoring_record(TOPICS, dead, b"acme").key == b"acme"


@pytest.mark.parametrize("partitions", [1, 4, 24])
def test_a_tenants_partition_is_the_java_clients_murmur2(partitions: int) -> None:
    every = list(range(partitions))
    murmur2 = DefaultPartitioner()
    for tenant in ["acme", "globex", "tenant-0", "tenant-999999", "ünïcode", "🙂"]:
        expected = murmur2(tenant.encode("utf-8"), every, every)
        assert partition_of(tenant, partitions) == expected


def test_every_librdkafka_producer_is_idempotent_acks_all_and_murmur2() -> None:
    config = producer_config(KAFKA, "librdkafka", {"linger.ms": 2})
    assert config["enable.idempotence"] is True
    assert config["acks"] == "all"
    assert config["partitioner"] == "murmur2_random"
    assert config["linger.ms"] == 2
    assert config["sasl.password"] == "s3cret"  # the connection's settings come along


def test_every_aiokafka_producer_is_idempotent_and_acks_all() -> None:
    config = producer_config(KAFKA, "aiokafka", {"linger_ms": 5})
    assert (config["enable_idempotence"], config["acks"], config["linger_ms"]) == (True, "all", 5)
    assert "partitioner" not in config  # aiokafka's default is murmur2 (the test above)
    assert config["sasl_plain_password"] == "s3cret"


@pytest.mark.parametrize(
    ("dialect", "own"),
    [("librdkafka", {"acks": 1}), ("librdkafka", {"partitioner": "consistent_random"}),
     ("aiokafka", {"enable_idempotence": False})],
)  # fmt: skip
def test_a_producer_cannot_override_what_every_producer_has(
    dialect: str, own: dict[str, object]
) -> None:
    with pytest.raises(ValueError, match="every producer has them"):
        producer_config(KAFKA, dialect, own)  # type: ignore[arg-type]
