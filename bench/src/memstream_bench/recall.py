"""`bench recall`: recall latency at 10k and 100k memories (1M on request) over tenants, vs raw.

The index is seeded directly through the real `ProjectionWriter` (the same Lua apply as the
worker) with random unit vectors and short texts drawn from a small vocabulary, so no text is
embedded; queries are random vectors with three vocabulary words for one random tenant.

Measured per query, interleaved so that drift on a shared machine hits both sides alike:

- memstream: `RedisRecaller.search(HybridQuery)` — BM25 and KNN pipelined, fused, parsed
  into memories (what `memstream recall` does after embedding);
- raw: one `FT.SEARCH` of the same vector, same tenant filter and returned fields, through
  redis-py's own `ft().search()`;
- for reference, memstream's vector-only path and a raw pipelined pair of the same two
  queries (what hybrid costs at the server without memstream's code);
- end to end, when a real embedder is given: embedding the query text on it, then the hybrid
  search, fusion, deduplication and the reranker as configured — a recall as a caller sees it
  (`end_to_end_p95_ms`), and the same without the reranker. The other paths are timed without
  the reranker: they measure the search.

`--sizes 10000,100000,1000000 --tenants 10000` adds the 1M-memory size (10k tenants); its
seeding takes ~3 minutes and 5.5 GB of Redis on 2 cores, so it is not among the defaults.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from memstream.config import Settings
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.events import MessageRecorded, memories_of
from memstream.memory.ports import Embedded
from memstream.projections.connection import text
from memstream.projections.recall import HybridQuery, RedisRecaller, VectorQuery
from memstream.projections.schema import VectorType
from memstream.projections.writer import RedisProjectionWriter
from memstream.providers import EmbedderCatalogue
from memstream_bench.harness import BenchNamespace
from memstream_bench.raw_redis import raw_knn, raw_pipelined
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Latency, Progress, ratio

__all__ = ["RANDOM_VECTORS_MODEL", "run_recall", "seed_memories", "seeded_message"]

TARGET = "p99 ≤ 1.3x raw"
RANDOM_VECTORS_MODEL = _MODEL = "bench-random-unit-vectors"
_VOCABULARY = [f"word{i}" for i in range(2000)] + ["Caroline", "Melanie", "May", "2023"]


def seeded_message(i: int, tenants: int, content: str, at: datetime) -> MessageRecorded:
    """The `i`th memory seeded for random-vector recall benches, its tenant round-robin."""
    return MessageRecorded(
        tenant=f"tenant-{i % tenants}",
        thread="t",
        source_id=str(i),
        content=content,
        speaker="user",
        recorded_at=at,
        importance=0.5,
        embedding_model=_MODEL,
    )


def seed_memories(
    ns: BenchNamespace,
    start: int,
    stop: int,
    tenants: int,
    dims: int,
    progress: Progress,
    *,
    model: str = _MODEL,
) -> None:
    """Memories `start` to `stop` (random words, random unit vectors, tenants round-robin)
    written straight to the namespace's projection under `model`'s id: what a bench that
    measures reads needs, in seconds rather than the embedder's hours."""
    rng = np.random.default_rng(start)
    words = random.Random(start)
    at = datetime.now(UTC)

    async def write() -> None:
        writer = RedisProjectionWriter(
            ns.projection.async_client(),
            ns.keys,
            max_memories=0,
            vector_type=VectorType(ns.settings.vector_type),
            url=ns.settings.redis,
        )
        await writer.ensure_live_index(model, dims)
        for low in range(start, stop, 500):
            high = min(low + 500, stop)
            vectors = rng.standard_normal((high - low, dims)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            batch = []
            for row, i in enumerate(range(low, high)):
                text = " ".join(words.choices(_VOCABULARY, k=12))
                event = replace(seeded_message(i, tenants, text, at), embedding_model=model)
                batch.append(Embedded(event, memories_of(event), vectors[row : row + 1]))
            await writer.apply(batch)
            progress.tick("memories seeded", high, stop)

    asyncio.run(write())


def _keys_bytes(ns: BenchNamespace) -> int:
    """What the bench namespace's own keys take (MEMORY USAGE of each, every field counted):
    unlike INFO's total, not moved by anything else the shared Redis holds meanwhile."""
    total = 0
    keys = list(ns.redis.scan_iter(match=f"{ns.keys.namespace}:*", count=1000))
    for low in range(0, len(keys), 1000):
        with ns.redis.pipeline(transaction=False) as pipe:
            for key in keys[low : low + 1000]:
                pipe.memory_usage(key, samples=0)
            total += sum(used or 0 for used in pipe.execute())
    return total


def _index_bytes(ns: BenchNamespace) -> float:
    """The search index's own memory (vectors, terms, tags, document table), from FT.INFO."""
    reply = ns.redis.execute_command("FT.INFO", ns.keys.index_name)  # type: ignore[no-untyped-call]
    pairs = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2], strict=True)
    info = {text(name): value for name, value in pairs}
    parts = ("vector_index_sz_mb", "total_index_memory_sz_mb")
    return sum(float(text(info[part])) for part in parts) * (1 << 20)


def _calls(
    ns: BenchNamespace,
    recaller: RedisRecaller,
    tenant: str,
    text: str,
    vector: Vectors,
    embedder: Embedder | None,
) -> list[tuple[str, Callable[[], object]]]:
    """The ways of asking the same question, as timed calls; the reranker's apart
    (`_RERANKED`), as its CPU would disturb the searches timed beside it."""
    hybrid = HybridQuery(tenant, text, vector, k=10)
    pair = [hybrid.semantic.command(ns.keys.index_name)]
    lexical = hybrid.lexical.command(ns.keys.index_name)
    if lexical is not None:
        pair.append(lexical)

    # The search's own cost: the reranker (on by default) is the end to end's, both ways.
    searching = replace(recaller.tuning, rerank_depth=0)
    calls: list[tuple[str, Callable[[], object]]] = [
        ("hybrid", lambda: recaller.search(hybrid, searching)),
        ("vector", lambda: recaller.search_vector(VectorQuery(tenant, vector, 10))),
        ("raw", raw_knn(ns.redis, ns.keys.index_name, tenant, vector)),
        ("raw_pair", raw_pipelined(ns.redis, pair)),
    ]
    if embedder is not None:
        # The seeded vectors are random, so the embedded query finds nothing meaningful; what
        # is timed is the work, which does not depend on what the vectors mean.
        calls += [
            (
                _RERANKED,
                lambda: recaller.search(HybridQuery(tenant, text, embedder.embed_query(text))),
            ),
            (
                "end_to_end_without_reranker",
                lambda: recaller.search(
                    HybridQuery(tenant, text, embedder.embed_query(text)), searching
                ),
            ),
        ]
    return calls


_RERANKED = "end_to_end"


def _measure(
    ns: BenchNamespace,
    tenants: int,
    dims: int,
    queries: int,
    seed: int,
    embedder: Embedder | None,
) -> dict[str, Latency]:
    recaller = RedisRecaller(
        ns.redis,
        ns.keys,
        EmbedderCatalogue(ns.settings, _NoEmbedder(dims)),
        tuning=ns.deployment.recall_tuning(),
        url=ns.settings.redis,
    )
    stored_as = VectorType(ns.settings.vector_type)
    timings: dict[str, list[float]] = {}
    warm_up = 50  # queries that open connections and warm caches, not counted
    # The same queries twice: the searches interleaved, then the reranked end to end alone.
    for reranked in (False, True):
        rng = np.random.default_rng(seed)
        words = random.Random(seed)
        for n in range(queries + warm_up):
            tenant = f"tenant-{words.randrange(tenants)}"
            vector = rng.standard_normal(dims).astype(np.float32)
            vector /= np.linalg.norm(vector)
            vector = stored_as.cast(vector)  # every call, the raw ones too, sends its type
            text = " ".join(words.choices(_VOCABULARY, k=3))
            calls = [
                (name, call)
                for name, call in _calls(ns, recaller, tenant, text, vector, embedder)
                if (name == _RERANKED) == reranked
            ]
            # Rotating who goes first keeps any warm-cache advantage from favouring one side.
            shift = n % max(len(calls), 1)
            for name, call in calls[shift:] + calls[:shift]:
                t0 = time.perf_counter()
                call()
                if n >= warm_up:
                    timings.setdefault(name, []).append(time.perf_counter() - t0)
    return {name: Latency.of_seconds(values) for name, values in timings.items()}


class _NoEmbedder:
    """The recaller's embedder is never called here: queries bring their own vectors."""

    model_id = _MODEL

    def __init__(self, dims: int) -> None:
        self.dims = dims

    def embed_documents(self, texts: object) -> np.ndarray:  # pragma: no cover
        raise AssertionError("the recall bench never embeds")

    def embed_query(self, text: str) -> np.ndarray:  # pragma: no cover
        raise AssertionError("the recall bench never embeds")


def run_recall(
    settings: Settings,
    embedder: Embedder | None,
    *,
    sizes: tuple[int, ...] = (10_000, 100_000),
    tenants: int = 1000,
    queries: int = 1000,
    dims: int = 384,
) -> BenchResult:
    started = time.monotonic()
    progress = Progress("recall")
    per_size: dict[str, dict[str, float]] = {}
    comparisons = []
    with BenchNamespace(settings, "recall") as ns:
        seeded = 0
        for size in sorted(sizes):
            progress.say(f"seeding {size - seeded} memories over {tenants} tenants")
            seed_memories(ns, seeded, size, tenants, dims, progress)
            seeded = size
            progress.say(f"{queries} queries at {size} memories")
            lat = _measure(ns, tenants, dims, queries, size, embedder)
            hybrid, raw = lat["hybrid"], lat["raw"]
            per_size[str(size)] = {
                "memories": size,
                "tenants": tenants,
                "p50_ms": hybrid.p50_ms,
                "p99_ms": hybrid.p99_ms,
                "raw_p50_ms": raw.p50_ms,
                "raw_p99_ms": raw.p99_ms,
                "p99_ratio": ratio(hybrid.p99_ms, raw.p99_ms),
                "vector_only_p50_ms": lat["vector"].p50_ms,
                "vector_only_p99_ms": lat["vector"].p99_ms,
                "vector_only_p99_ratio": ratio(lat["vector"].p99_ms, raw.p99_ms),
                "raw_hybrid_pair_p50_ms": lat["raw_pair"].p50_ms,
                "raw_hybrid_pair_p99_ms": lat["raw_pair"].p99_ms,
                "hybrid_vs_raw_pair_p99_ratio": ratio(hybrid.p99_ms, lat["raw_pair"].p99_ms),
                "hybrid_p95_ms": hybrid.p95_ms,
                # Everything a memory costs Redis (hash, index, orders, markers), and of that
                # the search index's share.
                "redis_bytes_per_memory": round((_keys_bytes(ns) + _index_bytes(ns)) / size, 1),
                "index_bytes_per_memory": round(_index_bytes(ns) / size, 1),
            }
            if "end_to_end" in lat:
                end_to_end = lat["end_to_end"]
                per_size[str(size)] |= {
                    "end_to_end_p50_ms": end_to_end.p50_ms,
                    "end_to_end_p95_ms": end_to_end.p95_ms,
                    "end_to_end_p99_ms": end_to_end.p99_ms,
                    "end_to_end_without_reranker_p50_ms": lat["end_to_end_without_reranker"].p50_ms,
                    "end_to_end_without_reranker_p95_ms": lat["end_to_end_without_reranker"].p95_ms,
                }
            label = f"{size // 1_000_000}M" if size >= 1_000_000 else f"{size // 1000}k"
            comparisons += [
                Comparison(
                    f"hybrid p99 @{label}",
                    hybrid.p99_ms,
                    raw.p99_ms,
                    "ms",
                    "raw FT.SEARCH KNN",
                    False,
                    TARGET,
                ),
                Comparison(
                    f"hybrid p50 @{label}",
                    hybrid.p50_ms,
                    raw.p50_ms,
                    "ms",
                    "raw FT.SEARCH KNN",
                    False,
                ),
                Comparison(
                    f"vector-only p99 @{label}",
                    lat["vector"].p99_ms,
                    raw.p99_ms,
                    "ms",
                    "raw FT.SEARCH KNN",
                    False,
                    TARGET,
                ),
                *(
                    [
                        Comparison(
                            f"end-to-end p95 @{label}",
                            lat["end_to_end"].p95_ms,
                            raw.p95_ms,
                            "ms",
                            "raw FT.SEARCH KNN (no embedding)",
                            False,
                            "p95 <= 20 ms at 100k",
                        )
                    ]
                    if "end_to_end" in lat
                    else []
                ),
                Comparison(
                    f"hybrid p99 @{label} vs raw pair",
                    hybrid.p99_ms,
                    lat["raw_pair"].p99_ms,
                    "ms",
                    "raw pipelined BM25+KNN",
                    False,
                ),
            ]
    figures: dict[str, object] = {"sizes": per_size, **per_size[str(max(sizes))]}
    notes = []
    if embedder is not None:
        texts = [" ".join(random.Random(i).choices(_VOCABULARY[:50], k=8)) for i in range(200)]
        embedder.embed_query("warm up")
        durations = []
        for text in texts:
            t0 = time.perf_counter()
            embedder.embed_query(text)
            durations.append(time.perf_counter() - t0)
        embed = Latency.of_seconds(durations)
        figures["embed_query_p50_ms"] = embed.p50_ms
        figures["embed_query_p99_ms"] = embed.p99_ms
        notes.append(
            f"embedding a query ({embedder.model_id}) adds p50 {embed.p50_ms:.2f} ms, "
            f"p99 {embed.p99_ms:.2f} ms, not counted above"
        )
    return BenchResult("recall", figures, comparisons, notes, time.monotonic() - started)
