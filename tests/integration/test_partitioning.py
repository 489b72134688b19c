"""Every producer puts a tenant's events on the same partition: per-tenant order in the log
is what makes a replay equal the live projection."""

from __future__ import annotations

import uuid

import pytest
from aiokafka.partitioner import DefaultPartitioner

from memstream.streams.background_publisher import BackgroundPublisher
from memstream.streams.wire import Record

from .helpers import TestStack

pytestmark = pytest.mark.integration


def test_the_agent_side_publisher_partitions_by_tenant_like_the_java_client(
    stack: TestStack,
) -> None:
    tenants = [f"part-{i}-{uuid.uuid4().hex[:6]}" for i in range(12)]
    publisher = BackgroundPublisher(stack.kafka)
    try:
        for tenant in tenants:
            # Not an event: the worker dead-letters it; only its partition matters here.
            publisher.submit(Record(stack.topics.memory, tenant.encode(), b"partition probe"))
        assert publisher.flush(30)
    finally:
        publisher.close()

    wanted = {t.encode() for t in tenants}
    records = stack.read_topic(stack.topics.memory, lambda rs: wanted <= {r.key for r in rs})
    murmur2 = DefaultPartitioner()
    partitions = list(range(stack.settings.partitions))
    for record in records:
        if record.key in wanted:
            assert record.partition == murmur2(record.key, partitions, partitions), record.key
