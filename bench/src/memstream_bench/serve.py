"""`bench serve`: what the HTTP API costs over memstream in-process, in the same run.

- search: the same queries, interleaved, over HTTP (`POST /v1/long-term-memory/search`, one
  keep-alive connection, hybrid, limit 10, with a tenant key) and through in-process recall
  (`RedisRecaller.recall`, k = 10) on the same projection (one tenant, 1,000 memories). Both
  embed the query with the same model and run both searches in one Redis round trip; the API
  also counts the tenant's matches for `total`. A third way, in turn with those two: a bare
  FastAPI route around the same recall under the same uvicorn (`bench.raw_http`), which tells
  the HTTP stack's share of the overhead from memstream's own. Figures: p50 overhead (ms),
  also as the median of each query's difference (steadier: a query's own cost cancels), each
  way against each, and p99 ratio.
- get by id: `GET /v1/long-term-memory/{id}` against `ProjectionReader.memory`, interleaved:
  the HTTP layer's own cost (parsing, the key's check, validation, JSON) without embedding.
- write latency: one record per request, sequentially, answered once Kafka acknowledged it
  (the default), and with `?wait=true` (answered once recallable), against a raw aiokafka
  `send_and_wait` of the same event.
- writes accepted per second with 16 concurrent clients (one record a request), against 16
  concurrent raw `send_and_wait`s of the same events on one producer, and against a bare
  FastAPI endpoint under the same uvicorn that sends each body to Kafka (`bench.raw_http`): the
  first ratio is the whole cost of HTTP, the second memstream's own share of it. Memstream's
  writes and the bare endpoint's run in rounds (3), each in halves taking turns (ours, bare,
  bare, ours), both servers up, so a load that drifts during the run weighs on both alike and
  one slow stretch on one round only. The worker is stopped for this part so its embedding
  does not share the CPU with the server.
- working memory (bench.sessions): put and append latency, and `memory_prompt` with a
  session against the long-term-only prompt, interleaved; then puts, appends and Redis Agent
  Memory store session events a second from 16 concurrent clients (a session each), against
  the bare endpoint's own session put, append and event (read the session, send its new
  messages to Kafka and wait, write it whole: `bench.raw_http`), in rounds of halves taking
  turns as the long-term writes do.
- compaction: after a memory is saved twice, `POST /v1/long-term-memory/compact` (it reads the
  tenant's memories and writes one consolidation), against reading the tenant's memories in
  process and sending one event.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TypeVar

import httpx
from aiokafka import AIOKafkaProducer

from memstream.config import Settings
from memstream.memory.embeddings import Embedder
from memstream.memory.events import MemorySaved, memories_of
from memstream.memory.model import MemoryType
from memstream.memory.ports import Recaller
from memstream.memory.tenancy import validate_tenant
from memstream.processes import free_port, running
from memstream.server.parts import api_keys
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import Topics
from memstream.streams.wire import event_record, producer_config, send
from memstream_bench.corpus import conversation_texts, turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.http_load import Load, concurrently, healthy
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.sessions import SessionRates, measure_sessions, session_rates
from memstream_bench.stats import Latency, Progress, ratio

__all__ = ["run_serve", "serving"]

TARGET_P50 = "p50 overhead ≤ 1 ms"
TARGET_P99 = "p99 ≤ 1.5x in-process"
TARGET_GET = "p50 overhead ≤ 2 ms"
TARGET_WRITES = "≥ 0.8x the bare service"
CLIENTS = 16
_TENANT = validate_tenant("tenant-0")
_READY_S = 90.0
T = TypeVar("T")


def run_serve(
    settings: Settings,
    embedder: Embedder,
    *,
    queries: int = 300,
    writes: int = 800,
    sequential: int = 100,
    memories: int = 1000,
    rounds: int = 3,
) -> BenchResult:
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    progress = Progress("serve")
    with BenchNamespace(settings, "serve", embedder) as ns:
        corpus = turns(max(memories // 2, 1), embedder.model_id, tenants=1)  # tenant-0's
        progress.say("starting a worker")
        ns.start_worker(corpus[0])
        progress.say(f"projecting {2 * len(corpus)} memories of one tenant")
        ns.publish(corpus)
        ns.wait_applied(corpus, 600, lambda d, t: progress.tick("tenant caught up", d, t))
        key, _ = api_keys(ns.deployment).create(_TENANT)
        recaller = ns.deployment.recaller()
        texts = conversation_texts()
        serve = ("memstream", "serve", "--port", "{port}")
        # Nothing consumes the dead-letter topic during the bench: the bare endpoint's
        # bodies (no events) go there, and are dropped with the namespace.
        bare = (
            "memstream_bench.raw_http",
            "{port}",
            ns.topics.dead_letters,
            f"{ns.keys.namespace}:bare-sessions",
        )
        with (
            serving(ns.settings, *serve) as url,
            serving(ns.settings, *bare) as bare_url,
            httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30
            ) as http,
            httpx.Client(base_url=bare_url, timeout=30) as bare_http,
        ):
            progress.say(f"{queries} searches over HTTP, bare HTTP and in-process, interleaved")
            searches = _Searches(http, bare_http, recaller)
            for i in range(queries + 20):
                # The first ones warm caches and connections.
                searches.one(texts[(7 * i) % len(texts)][:200], i, timed=i >= 20)
                progress.tick("searches", i + 1, queries + 20)
            over_http, bare_search, in_process = searches.times

            progress.say(f"{queries} reads by id over HTTP and in-process, interleaved")
            reader = ns.deployment.reader()
            ids = [m.id for t in corpus for m in memories_of(t)]
            get_http, get_local = [], []
            for i in range(queries + 20):
                memory_id = ids[(13 * i) % len(ids)]
                t0 = time.perf_counter()
                response = http.get(f"/v1/long-term-memory/{memory_id}")
                t1 = time.perf_counter()
                reader.memories_by_id(_TENANT, [memory_id])
                t2 = time.perf_counter()
                response.raise_for_status()
                if i >= 20:
                    get_http.append(t1 - t0)
                    get_local.append(t2 - t1)

            progress.say(f"{sequential} session puts, appends and prompts with and without one")
            sessions = measure_sessions(http, texts, sequential)

            compactions = max(sequential // 5, 3)
            progress.say(f"{compactions} compactions, each after a duplicate was saved")
            compacted, read_and_sent = _compactions(ns, http, embedder, compactions)

            progress.say(f"{sequential} sequential writes: acked, with ?wait=true, raw Kafka")
            acked = [_timed_write(http, "") for _ in range(sequential)]
            waited = [_timed_write(http, "?wait=true") for _ in range(sequential)]
            raw_single = asyncio.run(_raw_writes(ns.kafka, ns.topics, embedder, sequential, 1))[1]
            ns.stop_worker()
            progress.say(
                f"{rounds} x {writes} writes from {CLIENTS} clients to memstream and as many "
                "to a bare HTTP-to-Kafka endpoint, in halves taking turns"
            )
            halves = partial(_taking_turns, (url, bare_url), writes=writes, rounds=rounds)
            ours, baseline = halves(
                lambda at, n: asyncio.run(concurrently(at, key, n, CLIENTS, _write)), Load.total
            )
            progress.say(
                f"{rounds} x {writes} session puts, then appends, from {CLIENTS} clients to "
                "memstream and as many to the bare endpoint's sessions, in halves taking turns"
            )
            rates, bare_rates = halves(
                lambda at, n: asyncio.run(session_rates(at, key, _TENANT, texts, n, CLIENTS)),
                SessionRates.total,
            )
            progress.say(f"{writes} raw Kafka sends from {CLIENTS} clients")
            raw_s, raw_latency = asyncio.run(
                _raw_writes(ns.kafka, ns.topics, embedder, writes, CLIENTS)
            )
    # The machine's load (1-minute average, runnable processes): the ratios are of one run,
    # so they hold under it, but the absolute figures move with it.
    load = (round(load_before, 2), round(os.getloadavg()[0], 2))
    search, base = Latency.of_seconds(over_http), Latency.of_seconds(in_process)
    got, read = Latency.of_seconds(get_http), Latency.of_seconds(get_local)
    ack, wait, raw_ack = (Latency.of_seconds(s) for s in (acked, waited, raw_single))
    rate, raw_rate, bare_rate = ours.per_s, writes / raw_s, baseline.per_s
    put_rate, append_rate = rates.put.per_s, rates.append.per_s
    bare_put_rate, bare_append_rate = bare_rates.put.per_s, bare_rates.append.per_s
    event_rate, bare_event_rate = rates.event.per_s, bare_rates.event.per_s
    compact, compact_raw = Latency.of_seconds(compacted), Latency.of_seconds(read_and_sent)
    bare_search_latency = Latency.of_seconds(bare_search)
    overhead = round(search.p50_ms - base.p50_ms, 3)
    paired, bare_paired, over_bare = (
        _paired(over_http, in_process),
        _paired(bare_search, in_process),
        _paired(over_http, bare_search),
    )
    return BenchResult(
        name="serve",
        figures={
            "queries": queries,
            "memories": 2 * len(corpus),
            "search_http": _latency(search),
            "search_in_process": _latency(base),
            "p50_overhead_ms": overhead,
            "p50_overhead_paired_ms": paired,
            "search_bare_http": _latency(bare_search_latency),
            "bare_p50_overhead_paired_ms": bare_paired,
            "p50_over_bare_paired_ms": over_bare,
            "p99_ratio": ratio(search.p99_ms, base.p99_ms),
            "get_http": _latency(got),
            "get_in_process": _latency(read),
            "get_p50_overhead_ms": round(got.p50_ms - read.p50_ms, 3),
            "load_average_1m": {"start": load[0], "end": load[1], "cpus": os.cpu_count()},
            "write_acked": _latency(ack),
            "write_wait_true": _latency(wait),
            "write_raw_kafka": _latency(raw_ack),
            "clients": CLIENTS,
            "writes": writes,
            "rounds": rounds,
            "writes_per_s": round(rate, 1),
            "raw_writes_per_s": round(raw_rate, 1),
            "writes_ratio": ratio(rate, raw_rate),
            "bare_http_writes_per_s": round(bare_rate, 1),
            "writes_ratio_to_bare_http": ratio(rate, bare_rate),
            "concurrent_bare_http": _latency(baseline.latency),
            "concurrent_write": _latency(ours.latency),
            "concurrent_raw": _latency(Latency.of_seconds(raw_latency)),
            "session_put": _latency(sessions.put),
            "session_append": _latency(sessions.append),
            "prompt_with_session": _latency(sessions.prompt_with_session),
            "prompt_long_term_only": _latency(sessions.prompt_long_term),
            "session_puts_per_s": round(put_rate, 1),
            "session_appends_per_s": round(append_rate, 1),
            "session_puts_ratio_to_bare_http": ratio(put_rate, bare_rate),
            "session_appends_ratio_to_bare_http": ratio(append_rate, bare_rate),
            "bare_session_puts_per_s": round(bare_put_rate, 1),
            "bare_session_appends_per_s": round(bare_append_rate, 1),
            "session_puts_ratio_to_bare_sessions": ratio(put_rate, bare_put_rate),
            "session_appends_ratio_to_bare_sessions": ratio(append_rate, bare_append_rate),
            "store_session_events_per_s": round(event_rate, 1),
            "bare_store_session_events_per_s": round(bare_event_rate, 1),
            "store_session_events_ratio_to_bare": ratio(event_rate, bare_event_rate),
            "concurrent_store_session_event": _latency(rates.event.latency),
            "compact": _latency(compact),
            "compact_raw_read_and_send": _latency(compact_raw),
            "concurrent_session_put": _latency(rates.put.latency),
            "concurrent_session_append": _latency(rates.append.latency),
            "concurrent_bare_session_put": _latency(bare_rates.put.latency),
            "concurrent_bare_session_append": _latency(bare_rates.append.latency),
        },
        comparisons=[
            Comparison(
                "search p50",
                search.p50_ms,
                base.p50_ms,
                "ms",
                "in-process recall",
                False,
                TARGET_P50,
            ),
            Comparison(
                "search p50, HTTP",
                search.p50_ms,
                bare_search_latency.p50_ms,
                "ms",
                "bare FastAPI route around the same recall",
                False,
            ),
            Comparison(
                "search p99",
                search.p99_ms,
                base.p99_ms,
                "ms",
                "in-process recall",
                False,
                TARGET_P99,
            ),
            Comparison(
                "get by id p50", got.p50_ms, read.p50_ms, "ms", "in-process read", False, TARGET_GET
            ),
            Comparison(
                "write p50 (acked)", ack.p50_ms, raw_ack.p50_ms, "ms", "raw Kafka send", False
            ),
            Comparison(
                f"writes/s, {CLIENTS} clients",
                round(rate, 1),
                round(raw_rate, 1),
                "writes/s",
                "raw Kafka sends",
                True,
            ),
            Comparison(
                f"writes/s, {CLIENTS} clients (HTTP)",
                round(rate, 1),
                round(bare_rate, 1),
                "writes/s",
                "bare FastAPI endpoint to Kafka",
                True,
                TARGET_WRITES,
            ),
            Comparison(
                f"session puts/s, {CLIENTS} clients (HTTP)",
                round(put_rate, 1),
                round(bare_put_rate, 1),
                "puts/s",
                "bare FastAPI session put: GET, send to Kafka, SET",
                True,
                TARGET_WRITES,
            ),
            Comparison(
                f"session appends/s, {CLIENTS} clients (HTTP)",
                round(append_rate, 1),
                round(bare_append_rate, 1),
                "appends/s",
                "bare FastAPI session append: GET, send to Kafka, SET",
                True,
                TARGET_WRITES,
            ),
            Comparison(
                f"store session events/s, {CLIENTS} clients (HTTP)",
                round(event_rate, 1),
                round(bare_event_rate, 1),
                "events/s",
                "bare FastAPI session event: GET, send to Kafka, SET",
                True,
                TARGET_WRITES,
            ),
            Comparison(
                f"compact p50, {2 * len(corpus)} memories",
                compact.p50_ms,
                compact_raw.p50_ms,
                "ms",
                "read the tenant's memories, send one event to Kafka",
                False,
            ),
            Comparison(
                "memory_prompt p50, with a session",
                sessions.prompt_with_session.p50_ms,
                sessions.prompt_long_term.p50_ms,
                "ms",
                "long-term-only prompt",
                False,
            ),
        ],
        notes=[
            f"search over HTTP adds {overhead} ms at p50 ({paired} ms, the median of each "
            f"query's difference; a bare FastAPI route around the same recall adds "
            f"{bare_paired} ms, so {over_bare} ms is memstream's own); p99 is "
            f"{ratio(search.p99_ms, base.p99_ms)}x in-process",
            f"a write is answered at p50 {ack.p50_ms} ms once Kafka has it; with ?wait=true "
            f"(recallable) at p50 {wait.p50_ms} ms",
            "the worker was stopped for the concurrent writes (they are only acknowledged)",
            f"load average (1 min) {load[0]} at the start, {load[1]} at the end, on "
            f"{os.cpu_count()} CPUs",
            f"working memory: a put of a 20-message session p50 {sessions.put.p50_ms} ms "
            f"(p99 {sessions.put.p99_ms}), an append p50 {sessions.append.p50_ms} ms "
            f"(p99 {sessions.append.p99_ms}), both once the new turn is in Kafka",
        ],
        seconds=time.monotonic() - started,
    )


@contextmanager
def serving(settings: Settings, module: str, *args: str) -> Iterator[str]:
    """`python -m module PORT? args` on a free loopback port; yields its URL once it answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    handle, name = tempfile.mkstemp(prefix=f"{settings.namespace}-http-", suffix=".log")
    os.close(handle)
    log = Path(name)
    command = [sys.executable, "-m", module, *(a.replace("{port}", str(port)) for a in args)]
    env = {**os.environ, **settings.environ()}
    try:
        with running(command, env=env, log=log, ready=lambda: healthy(url), what=module):
            yield url
    finally:
        log.unlink(missing_ok=True)


class _Searches:
    """Each query three ways, back to back: memstream's search route, the bare route around
    the same recall (`raw_http`), and that recall in process. Which goes first turns with each
    query: the one after another finds the CPU (and the other processes' inference threads)
    in a different state. An untimed query also checks that the bare route found what the
    recall in process found, so that the baseline does the same work."""

    def __init__(self, http: httpx.Client, bare: httpx.Client, recaller: Recaller) -> None:
        self._http = http
        self._bare = bare
        self._recaller = recaller
        self.times: tuple[list[float], list[float], list[float]] = ([], [], [])

    def one(self, text: str, i: int, *, timed: bool) -> None:
        answers: list[object] = [None, None, None]
        for way in ((i + j) % 3 for j in range(3)):
            started = time.perf_counter()
            answers[way] = self._way(way, text)
            if timed:
                self.times[way].append(time.perf_counter() - started)
        if timed:
            return
        bare, recalled = answers[1], answers[2]
        assert isinstance(bare, httpx.Response) and isinstance(recalled, list)
        found = [str(m["id"]) for m in bare.json()["memories"]]
        if found != [hit.memory.id for hit in recalled]:
            raise AssertionError(
                f"the bare search route found {found}, the recall in process "
                f"{[hit.memory.id for hit in recalled]}: the baseline does not do the same work"
            )

    def _way(self, way: int, text: str) -> object:
        if way == 2:
            return self._recaller.recall(_TENANT, text, k=10)
        if way == 1:
            response = self._bare.post(
                "/v1/long-term-memory/search", params={"tenant": _TENANT}, json={"text": text}
            )
        else:
            response = self._http.post("/v1/long-term-memory/search", json={"text": text})
        return response.raise_for_status()


def _paired(these: Sequence[float], those: Sequence[float]) -> float:
    """The median of each query's difference in ms: its two times were taken back to back, so
    what the query itself costs (its length, its hits), which moves both p50s, cancels."""
    return round(1000 * statistics.median(a - b for a, b in zip(these, those, strict=True)), 3)


def _record(i: int) -> dict[str, object]:
    return {"id": uuid.uuid4().hex, "text": f"Bench note {i}: the user's locker is number {i}"}


def _saved(embedder: Embedder, i: int) -> MemorySaved:
    record = _record(i)
    return MemorySaved(
        tenant=_TENANT,
        memory_id=str(record["id"]),
        thread="",
        content=str(record["text"]),
        memory_type=MemoryType.USER_FACT,
        role="",
        saved_at=datetime.now(UTC),
        importance=0.5,
        embedding_model=embedder.model_id,
    )


def _compactions(
    ns: BenchNamespace, http: httpx.Client, embedder: Embedder, rounds: int
) -> tuple[list[float], list[float]]:
    """Each round, a memory saved twice (applied, not timed) and then one compaction over HTTP
    (it reads the tenant's memories and merges the two: one event); against the same raw work
    in process as many times: read the tenant's memories, send one event and wait."""
    reader = ns.deployment.reader()
    timed: list[float] = []
    for i in range(rounds):
        text = f"compaction bench duplicate {i}"
        twice = [{"id": uuid.uuid4().hex, "text": text} for _ in range(2)]
        saved = http.post("/v1/long-term-memory/?wait=true", json={"memories": twice})
        saved.raise_for_status()
        t0 = time.perf_counter()
        http.post("/v1/long-term-memory/compact").raise_for_status()
        timed.append(time.perf_counter() - t0)

    async def read_and_send() -> list[float]:
        producer = AIOKafkaProducer(**producer_config(ns.kafka, "aiokafka"))
        await producer.start()
        raw: list[float] = []
        try:
            for i in range(rounds):
                event = _saved(embedder, 10_000_000 + i)
                t0 = time.perf_counter()
                await asyncio.to_thread(reader.memories, _TENANT)
                await (await send(producer, event_record(ns.topics, event)))
                raw.append(time.perf_counter() - t0)
        finally:
            await producer.stop()
        return raw

    return timed, asyncio.run(read_and_send())


def _timed_write(http: httpx.Client, query: str) -> float:
    body = {"memories": [_record(0)]}
    t0 = time.perf_counter()
    http.post(f"/v1/long-term-memory/{query}", json=body).raise_for_status()
    return time.perf_counter() - t0


def _write(http: httpx.AsyncClient, client: int, i: int) -> Awaitable[httpx.Response]:
    return http.post("/v1/long-term-memory/", json={"memories": [_record(i)]})


def _taking_turns(
    urls: tuple[str, str],
    run: Callable[[str, int], T],
    total: Callable[[Sequence[T]], T],
    writes: int,
    rounds: int,
) -> tuple[T, T]:
    """`run`'s figures for memstream and the bare endpoint (`urls`), each `total`led over
    `rounds` rounds of `writes` requests in halves taking turns (ours, bare, bare, ours): a
    load that drifts weighs on both alike, and one slow stretch (a second of the run) on one
    round, not the figure (a single round's ratio moved by ±30 %)."""
    ours, bare = urls
    parts: dict[str, list[T]] = {ours: [], bare: []}
    for _ in range(rounds):
        for slot, url in enumerate((ours, bare, bare, ours)):
            half = writes // 2 if slot in (0, 1) else writes - writes // 2
            parts[url].append(run(url, half))
    return total(parts[ours]), total(parts[bare])


async def _raw_writes(
    kafka: KafkaConnection, topics: Topics, embedder: Embedder, writes: int, clients: int
) -> tuple[float, list[float]]:
    """The same kind of event sent straight to Kafka (acks=all, idempotent, as the server's
    producer), `clients` at a time, each waiting for its acknowledgement."""
    producer = AIOKafkaProducer(**producer_config(kafka, "aiokafka", {"linger_ms": 2}))
    await producer.start()
    latencies: list[float] = []
    queue = list(range(writes))
    try:

        async def client() -> None:
            while queue:
                event = _saved(embedder, queue.pop())
                t0 = time.perf_counter()
                await (await send(producer, event_record(topics, event)))
                latencies.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return time.perf_counter() - t0, latencies
    finally:
        await producer.stop()


def _latency(latency: Latency) -> dict[str, float]:
    return {"p50_ms": latency.p50_ms, "p99_ms": latency.p99_ms, "mean_ms": latency.mean_ms}
