"""The raw baselines of the speed benches: the least code that does the same job.

- `raw_consume`: a plain aiokafka consumer reading a topic from the start; nothing else.
- `RawPipeline`: a plain aiokafka consumer, JSON decoding, the same embedder in the same
  batches, and one pipelined HSET per memory of the same hash fields into a keyspace indexed
  exactly like memstream's (`{ns}-raw`), so the raw writes pay the same indexing cost. It has
  none of memstream's machinery: no Faust, no apply-once markers, no eviction, no positions,
  no dead letters.

`raw_consume` is timed from its first fetch (one fetch can bring a small topic whole), the
pipeline from its first record (its embedding dwarfs the fetch); neither counts consumer
start-up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer

from memstream.memory.cipher import Keyring
from memstream.memory.codec import DecodeContext, decode_event
from memstream.memory.embeddings import Embedder
from memstream.memory.events import memories_of
from memstream.memory.model import Memory
from memstream.projections.connection import RedisConnection
from memstream.projections.schema import Keyspace, VectorType
from memstream.streams.kafka import KafkaConnection
from memstream.streams.worker import BATCH_SIZE
from memstream_bench.raw_redis import RawHashes

__all__ = ["RawPipeline", "RawRun", "raw_consume", "raw_keyspace"]


@dataclass(frozen=True, slots=True)
class RawRun:
    records: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def raw_keyspace(namespace: str) -> Keyspace:
    return Keyspace(f"{namespace}-raw")


def _consumer(kafka: KafkaConnection, topic: str, *, from_start: bool) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        **kafka.aiokafka(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if from_start else "latest",
        max_poll_records=BATCH_SIZE,
    )


async def raw_consume(
    kafka: KafkaConnection, topic: str, expected: int, timeout_s: float = 120
) -> RawRun:
    """Read `expected` records of `topic` from its start as fast as a plain consumer can."""
    consumer = _consumer(kafka, topic, from_start=True)
    await consumer.start()
    try:
        # From the first fetch, not the first record: one fetch can bring the whole topic.
        count, first = 0, time.perf_counter()
        deadline = time.monotonic() + timeout_s
        while count < expected and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200, max_records=BATCH_SIZE)
            count += sum(len(records) for records in batches.values())
        return RawRun(count, time.perf_counter() - first)
    finally:
        await consumer.stop()


class RawPipeline:
    """Consume, decode, embed, HSET: the baseline for projection throughput and freshness."""

    def __init__(
        self,
        kafka: KafkaConnection,
        topic: str,
        redis: RedisConnection,
        namespace: str,
        embedder: Embedder,
        vector_type: VectorType,
        keyring: Keyring | None = None,
    ) -> None:
        self._kafka = kafka
        self._context = DecodeContext(keyring=keyring)  # sealed events: opened as the worker does
        self._topic = topic
        self._keys = raw_keyspace(namespace)
        self._hashes = RawHashes(redis, self._keys, embedder.dims, vector_type)
        self._embedder = embedder
        self._consumer: AIOKafkaConsumer | None = None

    def memory_key(self, tenant: str, memory_id: str) -> str:
        return self._keys.memory(tenant, memory_id)

    async def start(self, *, from_start: bool) -> None:
        await self._hashes.create_index()
        self._consumer = _consumer(self._kafka, self._topic, from_start=from_start)
        await self._consumer.start()
        if not from_start:
            await self.skip_to_end()

    async def skip_to_end(self) -> None:
        """Go on from the topic's end: `run` sees only records published after this returns."""
        assert self._consumer is not None, "start() first"
        await self._consumer.seek_to_end()
        for partition in self._consumer.assignment():
            await self._consumer.position(partition)  # resolved now, not at the next fetch

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
        await self._hashes.close()

    async def run(
        self,
        expected: int,
        timeout_s: float = 300,
        tick: Callable[[int, int], None] | None = None,
        *,
        clock_from: float | None = None,
    ) -> RawRun:
        """Process records until `expected` have been written (or the timeout), timed from
        `clock_from` (a `time.perf_counter()` reading) when given, else from the first record."""
        assert self._consumer is not None, "start() first"
        count, first = 0, clock_from or 0.0
        deadline = time.monotonic() + timeout_s
        while count < expected and time.monotonic() < deadline:
            batches = await self._consumer.getmany(timeout_ms=100, max_records=BATCH_SIZE)
            records = [r for rs in batches.values() for r in rs]
            if not records:
                continue
            if not first:
                first = time.perf_counter()
            await self._process([r.value for r in records])
            count += len(records)
            if tick:
                tick(count, expected)
        return RawRun(count, time.perf_counter() - first if first else 0.0)

    async def _process(self, values: list[bytes]) -> None:
        memories: list[Memory] = []
        for value in values:
            # The same decoding as memstream's: writing the same hashes needs the same fields.
            memories.extend(memories_of(decode_event(value, self._context)))
        vectors = await asyncio.to_thread(
            self._embedder.embed_documents, [m.content for m in memories]
        )
        await self._hashes.write(memories, vectors)
