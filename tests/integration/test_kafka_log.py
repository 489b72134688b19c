"""The healer's re-read of the log, on the real Kafka: exactly the offsets asked for, and a
partition that gives nothing ends the read (the healer holds its lock while reading)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from memstream import Settings
from memstream.errors import KafkaUnavailableError
from memstream.streams.heal import KafkaLog
from memstream.streams.projector import RawMessage

from .helpers import TestStack

pytestmark = pytest.mark.integration


def _published(stack: TestStack, count: int) -> tuple[int, list[int]]:
    """`count` messages of one key (one partition): that partition and their offsets."""
    key = f"kafka-log-{uuid.uuid4().hex[:8]}".encode()
    before = stack.end_offsets(stack.topics.memory)
    for n in range(count):
        stack.publish_raw(key, f"message {n}".encode())
    after = stack.end_offsets(stack.topics.memory)
    (partition,) = [p for p in after if after[p] > before[p]]
    return partition, list(range(before[partition], after[partition]))


async def _read(log: KafkaLog, topic: str, partition: int, first: int, last: int) -> list[Any]:
    chunks: list[list[RawMessage]] = []
    async for chunk in log.read(topic, partition, first, last):
        chunks.append(chunk)
    return chunks


def test_a_re_read_yields_exactly_the_offsets_asked_for(settings: Settings) -> None:
    stack = TestStack(settings)
    partition, offsets = _published(stack, 5)
    log = KafkaLog(stack.kafka, "")
    chunks = asyncio.run(_read(log, stack.topics.memory, partition, offsets[1], offsets[3]))
    read = [m for chunk in chunks for m in chunk]
    assert [m.offset for m in read] == offsets[1:4]
    assert [m.value for m in read] == [b"message 1", b"message 2", b"message 3"]
    assert {m.partition for m in read} == {partition}


def test_a_partition_that_gives_nothing_ends_the_read_with_a_retryable_error(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = TestStack(settings)
    partition, offsets = _published(stack, 3)

    async def nothing(self: AIOKafkaConsumer, *partitions: Any, **options: Any) -> dict[Any, Any]:
        await asyncio.sleep(options.get("timeout_ms", 0) / 1000)
        return {}  # what a fetch gets while the partition's leader is away

    monkeypatch.setattr(AIOKafkaConsumer, "getmany", nothing)
    log = KafkaLog(stack.kafka, "", stall_s=1.5)
    started = time.monotonic()
    with pytest.raises(KafkaUnavailableError) as caught:
        asyncio.run(_read(log, stack.topics.memory, partition, offsets[0], offsets[-1]))
    assert time.monotonic() - started < 30  # ended by the stall, not by the test's patience
    said = str(caught.value)
    assert f"read {stack.topics.memory}/{partition} again" in said
    assert f"no message past offset {offsets[0]} of {offsets[-1] + 1}" in said
    assert "the worker retries" in said
