"""`bench replay`: events/s of rebuilding a fresh projection from the log, against a raw consume.

The rebuild's inner loop, as `memstream replay` runs it: the real `Projector` (decode, embed,
apply once) driven over a plain consumer reading the memory topic from its start, into a
fresh namespace (without `replay`'s generation swap, which is one script call at the end).
It is measured twice:

- re-embedding every memory (`memstream replay --reembed`);
- with the vectors precomputed (`PrecomputedEmbedder`, a dictionary lookup), which is what
  `memstream replay` costs when it reuses the live generation's vectors: the framework's own
  overhead.

The baseline is a plain consumer reading the same topic and doing nothing else.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import numpy as np
from aiokafka import AIOKafkaConsumer

from memstream.bench.corpus import turns
from memstream.bench.harness import BenchNamespace
from memstream.bench.raw import RawRun, raw_consume
from memstream.bench.report import BenchResult, Comparison
from memstream.bench.stats import Progress, ratio
from memstream.config import Settings
from memstream.errors import InvalidInputError
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.events import memories_of
from memstream.projections.connection import async_redis_client
from memstream.projections.schema import Keyspace
from memstream.projections.writer import RedisProjectionWriter
from memstream.streams.projector import Projector, RawMessage
from memstream.streams.replay import CountedDeadLetters
from memstream.streams.worker import BATCH_SIZE

__all__ = ["PrecomputedEmbedder", "run_replay"]

TARGET = "≥ 0.7x raw"


class PrecomputedEmbedder:
    """An Embedder that looks vectors up by text: what a replay reusing stored vectors costs."""

    def __init__(self, model_id: str, vectors: dict[str, Vectors], dims: int) -> None:
        self._model_id = model_id
        self._vectors = vectors
        self.dims = dims

    @property
    def model_id(self) -> str:
        return self._model_id

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        try:
            stacked: Vectors = np.stack([self._vectors[text] for text in texts])
        except KeyError as exc:
            raise InvalidInputError(f"no precomputed vector for {exc.args[0]!r:.60}") from None
        return stacked

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self.embed_documents([text])[0]
        return vector


async def _rebuild(
    settings: Settings,
    topic: str,
    target: str,
    embedder: Embedder,
    expected: int,
    progress: Progress,
) -> RawRun:
    writer = RedisProjectionWriter(
        async_redis_client(settings.redis),
        Keyspace(target),
        max_memories=settings.max_memories_per_tenant,
        url=settings.redis,
    )
    projector = Projector(
        embedder,
        writer,
        CountedDeadLetters(),
        default_importance=settings.default_importance,
    )
    await projector.start()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=settings.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=BATCH_SIZE,
    )
    await consumer.start()
    try:
        # Timed like raw_consume, from the first fetch; records of every partition fetched
        # together are projected together, as the worker's take_events batches them.
        count, first = 0, time.perf_counter()
        while count < expected:
            batches = await consumer.getmany(timeout_ms=200, max_records=BATCH_SIZE)
            records = [r for rs in batches.values() for r in rs]
            if not records:
                continue
            await projector.project([RawMessage.of(r) for r in records])
            count += len(records)
            progress.tick(f"replayed into {target}", count, expected)
        return RawRun(count, time.perf_counter() - first)
    finally:
        await consumer.stop()


def run_replay(settings: Settings, embedder: Embedder, *, count: int = 600) -> BenchResult:
    started = time.monotonic()
    progress = Progress("replay")
    with BenchNamespace(settings, "replay") as ns:
        events = turns(count, embedder.model_id)
        progress.say(f"writing {count} turns to the log (no worker)")
        ns.publish(events)
        topic = ns.topics.memory
        progress.say("raw consume of the topic")
        raw = asyncio.run(raw_consume(ns.settings.bootstrap_servers, topic, count))

        progress.say("replay, re-embedding every memory")
        embedded = asyncio.run(
            _rebuild(ns.settings, topic, ns.scratch("rebuilt"), embedder, count, progress)
        )

        texts = sorted({m.content for e in events for m in memories_of(e)})
        vectors = dict(zip(texts, embedder.embed_documents(texts), strict=True))
        cached = PrecomputedEmbedder(embedder.model_id, vectors, embedder.dims)
        progress.say("replay with precomputed vectors")
        reused = asyncio.run(
            _rebuild(ns.settings, topic, ns.scratch("reused"), cached, count, progress)
        )

    figures = {
        "events": count,
        "events_per_s": round(embedded.per_second, 1),
        "raw_events_per_s": round(raw.per_second, 1),
        "ratio": ratio(embedded.per_second, raw.per_second),
        "precomputed_vectors_events_per_s": round(reused.per_second, 1),
        "precomputed_vectors_ratio": ratio(reused.per_second, raw.per_second),
    }
    return BenchResult(
        name="replay",
        figures=figures,
        comparisons=[
            Comparison(
                "replay (re-embedding)",
                figures["events_per_s"],
                figures["raw_events_per_s"],
                "events/s",
                "raw consume",
                True,
                TARGET,
            ),
            Comparison(
                "replay (vectors precomputed)",
                figures["precomputed_vectors_events_per_s"],
                figures["raw_events_per_s"],
                "events/s",
                "raw consume",
                True,
                TARGET,
            ),
        ],
        notes=["the real Projector over a plain consumer: the inner loop of `memstream replay`"],
        seconds=time.monotonic() - started,
    )
