"""`bench replay`: events/s of `memstream replay`, against the fair raw baseline.

What is measured:
- **replay** (the headline): the real `Replayer`, swap included — allocate a generation,
  create its index, read the log from the start, reuse the live generation's stored vectors
  (`known_vectors`), apply every event once, swap it in atomically and drop the retired
  generation — exactly `memstream replay`. Timed from the call to its return.
- **replay --reembed**: the same, embedding every memory again (it is also what builds the
  live generation the headline replay reuses).
- **projector loop**: the rebuild's inner loop alone (the real `Projector` over a plain
  consumer, vectors from a dictionary, no start, no lookup, no swap): separates the cost of
  apply-once from the replay's own set-up, lookup and swap.

The baseline (`raw.RawPipeline` given the stored vectors): a plain consumer reading the same
topic, decoding, and pipelined HSETs of the same documents with the same vectors into an
index of the same schema — everything a rebuild must do, with none of memstream's machinery.
A bare consume (no writes, no HNSW) is reported too, for scale only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import numpy as np
from aiokafka import AIOKafkaConsumer

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import InvalidInputError
from memstream.memory.cipher import Keyring
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.events import MemoryEvent, memories_of
from memstream.projections.connection import RedisConnection, async_redis_client
from memstream.projections.generations import RedisGenerations
from memstream.projections.schema import Keyspace, VectorType
from memstream.projections.writer import RedisProjectionWriter
from memstream.providers import EmbedderCatalogue
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import Overlapping, Projector, RawMessage
from memstream.streams.replay import CountedDeadLetters
from memstream.streams.replay import Progress as ReplayProgress
from memstream.streams.worker import BATCH_SIZE
from memstream_bench.corpus import turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.raw import RawPipeline, RawRun, raw_consume
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Progress, ratio

__all__ = ["PrecomputedEmbedder", "drawn_vectors", "rebuild_loop", "replay_run", "run_replay"]

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


def drawn_vectors(
    events: Sequence[MemoryEvent], model_id: str, dims: int, seed: int = 7
) -> PrecomputedEmbedder:
    """A random unit vector for each text of `events`' memories, under `model_id`: for benches
    that time what is done with stored vectors, not what they mean."""
    texts = sorted({memory.content for event in events for memory in memories_of(event)})
    drawn = np.random.default_rng(seed).standard_normal((len(texts), dims)).astype(np.float32)
    drawn /= np.linalg.norm(drawn, axis=1, keepdims=True)
    return PrecomputedEmbedder(model_id, dict(zip(texts, drawn, strict=True)), dims)


async def rebuild_loop(
    settings: Settings,
    topic: str,
    target: str,
    embedder: Embedder,
    expected: int,
    progress: Progress,
    keyring: Keyring | None = None,
) -> RawRun:
    """The projector loop alone over `topic`, into the keyspace `target` (`keyring` opens
    sealed events)."""
    writer_client = async_redis_client(RedisConnection.from_settings(settings))
    writer = RedisProjectionWriter(
        writer_client,
        Keyspace(target),
        max_memories=settings.max_memories_per_tenant,
        vector_type=VectorType(settings.vector_type),
        url=settings.redis,
    )
    projector = Projector(
        EmbedderCatalogue(settings, embedder),
        writer,
        RedisGenerations(writer_client, Keyspace(target), url=settings.redis),
        CountedDeadLetters(),
        default_importance=settings.default_importance,
        keyring=keyring,
    )
    await projector.start()
    consumer = AIOKafkaConsumer(
        topic,
        **KafkaConnection.from_settings(settings).aiokafka(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=BATCH_SIZE,
    )
    await consumer.start()
    try:
        # Timed like raw_consume, from the first fetch; records of every partition fetched
        # together are projected together, as the worker's take_events batches them.
        # Batches overlap as the replay's do: one is prepared while Redis applies the last.
        count, first = 0, time.perf_counter()
        async with Overlapping(projector) as overlapping:
            while count < expected:
                batches = await consumer.getmany(timeout_ms=200, max_records=BATCH_SIZE)
                records = [r for rs in batches.values() for r in rs]
                if not records:
                    continue
                await overlapping.project([RawMessage.of(r) for r in records])
                count += len(records)
                progress.tick(f"replayed into {target}", count, expected)
        return RawRun(count, time.perf_counter() - first)
    finally:
        await consumer.stop()


async def replay_run(deployment: Deployment, *, reembed: bool, progress: Progress) -> RawRun:
    """`memstream replay` (swap included), timed from the call to its return."""

    def tick(at: ReplayProgress) -> None:
        progress.tick("replayed", at.done, at.total)

    async with deployment.replayer() as replayer:
        first = time.perf_counter()
        rebuilt = await replayer.rebuild(swap=True, reembed=reembed, progress=tick)
        seconds = time.perf_counter() - first
    return RawRun(rebuilt.messages, seconds)


async def _raw_writes(ns: BenchNamespace, cached: Embedder, count: int) -> RawRun:
    pipeline = RawPipeline(
        ns.kafka,
        ns.topics.memory,
        ns.projection.connection,
        ns.settings.namespace,
        cached,
        VectorType(ns.settings.vector_type),
        ns.deployment.keyring(),
    )
    await pipeline.start(from_start=True)
    try:
        return await pipeline.run(count)
    finally:
        await pipeline.stop()


def run_replay(settings: Settings, embedder: Embedder, *, count: int = 1500) -> BenchResult:
    started = time.monotonic()
    progress = Progress("replay")
    with BenchNamespace(settings, "replay", embedder) as ns:
        events = turns(count, embedder.model_id)
        progress.say(f"writing {count} turns to the log (no worker)")
        ns.publish(events)
        topic = ns.topics.memory
        progress.say("bare consume of the topic")
        bare = asyncio.run(raw_consume(ns.kafka, topic, count))

        progress.say("replay --reembed (builds the live generation)")
        reembedded = asyncio.run(replay_run(ns.deployment, reembed=True, progress=progress))

        texts = sorted({m.content for e in events for m in memories_of(e)})
        vectors = dict(zip(texts, embedder.embed_documents(texts), strict=True))
        cached = PrecomputedEmbedder(embedder.model_id, vectors, embedder.dims)
        progress.say("raw baseline: consume + pipelined HSETs with the stored vectors")
        raw = asyncio.run(_raw_writes(ns, cached, count))

        progress.say("replay, reusing the stored vectors, swap included")
        replayed = asyncio.run(replay_run(ns.deployment, reembed=False, progress=progress))

        progress.say("the projector loop alone, vectors precomputed")
        loop = asyncio.run(
            rebuild_loop(
                ns.settings,
                topic,
                ns.scratch("loop"),
                cached,
                count,
                progress,
                ns.deployment.keyring(),
            )
        )

    figures = {
        "events": count,
        "events_per_s": round(replayed.per_second, 1),
        "raw_events_per_s": round(raw.per_second, 1),
        "ratio": ratio(replayed.per_second, raw.per_second),
        "reembed_events_per_s": round(reembedded.per_second, 1),
        "reembed_ratio": ratio(reembedded.per_second, raw.per_second),
        "projector_loop_events_per_s": round(loop.per_second, 1),
        "projector_loop_ratio": ratio(loop.per_second, raw.per_second),
        "bare_consume_events_per_s": round(bare.per_second, 1),
    }
    return BenchResult(
        name="replay",
        figures=figures,
        comparisons=[
            Comparison(
                "replay (stored vectors, swap included)",
                figures["events_per_s"],
                figures["raw_events_per_s"],
                "events/s",
                "consume + pipelined HSETs, same vectors and index schema",
                True,
                TARGET,
            ),
            Comparison(
                "projector loop (vectors precomputed)",
                figures["projector_loop_events_per_s"],
                figures["raw_events_per_s"],
                "events/s",
                "consume + pipelined HSETs, same vectors and index schema",
                True,
                "",
            ),
            Comparison(
                "replay --reembed",
                figures["reembed_events_per_s"],
                figures["raw_events_per_s"],
                "events/s",
                "consume + pipelined HSETs, same vectors and index schema",
                True,
                "",
            ),
        ],
        notes=[
            "the real Replayer (memstream replay), swap and drop of the retired generation "
            "included; bare consume for scale: "
            f"{figures['bare_consume_events_per_s']} events/s"
        ],
        seconds=time.monotonic() - started,
    )
