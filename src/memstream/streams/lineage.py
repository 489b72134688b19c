"""Lineage from the log: a memory's history, a tenant's memory as of a moment, and what changed
between two moments, read from the tenant's own partition of the memory topic.

The CLI (`history`, `recall --as-of`, `diff`), the HTTP routes and the MCP tools all ask this
one `Lineage`. It reads only the tenant's partition, keeps only records keyed by the tenant,
decodes them as the worker does (upcast; sealed content opened; content sealed under an erased
key skipped, as a replay skips it) and folds them with `memory.history`. A read of the log is
kept for `keep_s` seconds, and the as-of view of each cut it served with it, vectors included:
a repeated question does not read the log again. A view's vectors are the projection's stored
ones where the memory still stands with the same content (`StoredVectors`), embedded otherwise.
A search over a view ranks as recall does: the nearest memories by meaning and those holding
most of the question's words are the candidates, scored with BM25 over the whole view.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from memstream.errors import (
    DataKeyErasedError,
    EventDecodeError,
    KafkaUnavailableError,
    MemoryNotFoundError,
)
from memstream.memory.bounds import Bounds
from memstream.memory.cipher import Keyring
from memstream.memory.codec import decode_identified
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.events import TenantErased
from memstream.memory.history import Diffed, TenantLog, Touch
from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.provenance import Logged
from memstream.memory.ranking.fusion import RecallTuning
from memstream.memory.ranking.neighbours import neighbours_in
from memstream.memory.ranking.rank import CANDIDATES, TermStats, rank
from memstream.memory.ranking.tokens import memory_words, query_terms
from memstream.memory.tenancy import tenant_key, validate_tenant
from memstream.memory.validity import successors
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import RawMessage, worker_context

__all__ = [
    "HOLD_S",
    "KEEP_S",
    "Lineage",
    "StoredVectors",
    "TenantRead",
    "read_tenant_log",
]

KEEP_S = 30.0  # how long a read of a tenant's log answers before what came after is read
# How long a tenant's folded log is kept unasked: a question after that reads it all again.
HOLD_S = 600.0
FETCH_BYTES = 16 * 1024 * 1024  # per fetch of the partition (aiokafka's default is 1 MiB)

# The projection's vectors for these memories of the tenant (None where it holds none, or
# holds another content or model).
StoredVectors = Callable[[str, Sequence[Memory]], Coroutine[Any, Any, list[Vectors | None]]]
T = TypeVar("T")


class _CollectorPause:
    """Pauses Python's cyclic garbage collector while any thread reads and folds a log.

    A read of a long log makes hundreds of thousands of objects (events, memories, touches)
    and no reference cycles, so the collector's full passes over them free nothing; they took
    a quarter of a first answer's time (0.33-0.44 s of 1.5-1.85 s, `bench asof`). Reference
    counting still frees what the read drops. The collector is resumed when the last reader
    is done, and only if it was running when the first began."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readers = 0
        self._resume = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._readers == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._readers += 1
        try:
            yield
        finally:
            with self._lock:
                self._readers -= 1
                if self._readers == 0 and self._resume:
                    gc.enable()


_collector_paused = _CollectorPause()


@dataclass(frozen=True, slots=True)
class TenantRead:
    """What one read of a tenant's partition found: its readable events in log order, and the
    partition's end when the read began (where the next read of what came after starts)."""

    events: list[Logged]
    end: int


async def read_tenant_log(
    kafka: KafkaConnection,
    topic: str,
    partition: int,
    tenant: str,
    *,
    embedding_model: str,
    default_importance: float,
    keyring: Keyring | None,
    start: int = 0,
) -> TenantRead:
    """The tenant's readable events on `partition` of `topic` from offset `start` (0: the
    beginning) up to its end now."""
    key = tenant_key(tenant)
    tp = TopicPartition(topic, partition)
    consumer = AIOKafkaConsumer(
        **kafka.aiokafka(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        # A few big fetches, not one per MiB: the whole partition is read, most of it
        # other tenants' records.
        max_partition_fetch_bytes=FETCH_BYTES,
        fetch_max_bytes=FETCH_BYTES,
    )
    found: list[Logged] = []
    try:
        await consumer.start()
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        if start:
            consumer.seek(tp, start)
        else:
            await consumer.seek_to_beginning(tp)
        while await consumer.position(tp) < end:
            batches = await consumer.getmany(tp, timeout_ms=500, max_records=50_000)
            for record in batches.get(tp, ()):
                if record.key != key or record.offset >= end:
                    continue  # another tenant's, or written after the read began
                message = RawMessage.of(record)
                context = worker_context(message, embedding_model, default_importance, keyring)
                try:
                    event, event_id = decode_identified(record.value or b"", context)
                except DataKeyErasedError:
                    continue  # erased for good: no view, no history holds it
                except EventDecodeError:
                    continue  # a dead letter: the projection never applied it either
                assert message.timestamp is not None  # Kafka stamps every record
                found.append(Logged(event, message.position, message.timestamp, event_id))
    except KafkaError as exc:
        raise KafkaUnavailableError(
            f"could not read tenant {tenant!r}'s log from Kafka at {kafka.where}: "
            f"{await kafka.explain(exc)}. Check the broker (`memstream status`)."
        ) from exc
    finally:
        await consumer.stop()
    return TenantRead(found, max(end, start))


@dataclass(frozen=True, slots=True)
class _Kept:
    """A tenant's folded log, the partition offset its read ended at, and when (monotonic
    seconds) it was last read to the end and last asked."""

    log: TenantLog
    end: int
    read_at: float
    asked_at: float


@dataclass(frozen=True, slots=True)
class _View:
    """The memory at one cut, ready to rank: vectors, and the rows holding each word."""

    memories: list[Memory]
    vectors: Vectors
    rows: dict[str, list[int]]

    def candidates(self, query: Vectors, terms: Sequence[str], k: int) -> list[int]:
        """The rows worth ranking, as recall gathers them: the `k` nearest by meaning and the
        `k` holding most of the query's words."""
        nearest = np.argsort(-(self.vectors @ query), kind="stable")[:k]
        matched: Counter[int] = Counter()
        for term in set(terms):
            matched.update(self.rows.get(term, ()))
        worded = [row for row, _ in matched.most_common(k)]
        return sorted({*nearest.tolist(), *worded})


class Lineage:
    """A tenant's past, from its partition of the memory log (see the module's docstring)."""

    def __init__(
        self,
        kafka: KafkaConnection,
        topic: str,
        partition_of: Callable[[str], int],
        embedder: Embedder,
        stored_vectors: StoredVectors,
        *,
        bounds: Bounds,
        tuning: RecallTuning,
        default_importance: float,
        keyring: Keyring | None,
        keep_s: float = KEEP_S,
        hold_s: float = HOLD_S,
    ) -> None:
        self._kafka = kafka
        self._topic = topic
        self._partition_of = partition_of
        self._embedder = embedder
        self._stored_vectors = stored_vectors
        self._bounds = bounds
        self._tuning = tuning
        self._default_importance = default_importance
        self._keyring = keyring
        self._keep_s = keep_s
        self._hold_s = hold_s
        self._logs: dict[str, _Kept] = {}
        self._views: dict[tuple[str, int], tuple[TenantLog, _View]] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="lineage")

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    def log(self, tenant: str) -> TenantLog:
        """The tenant's log as read at most `keep_s` seconds ago. An older read is brought up
        to date with what the partition got since; a log that saw an erasure there, or was not
        asked for `hold_s`, is read again from the start (its erased content must go)."""
        validate_tenant(tenant)
        now = time.monotonic()
        with self._lock:
            kept = self._logs.get(tenant)
            if kept is not None and now - kept.asked_at >= self._hold_s:
                kept = None
            if kept is not None and now - kept.read_at < self._keep_s:
                self._logs[tenant] = replace(kept, asked_at=now)
                return kept.log
        with _collector_paused():
            read = self._run(self._read(tenant, kept.end if kept is not None else 0))
            if kept is not None and not any(isinstance(e.event, TenantErased) for e in read.events):
                log = kept.log.extended(read.events)
            elif kept is not None:
                log = TenantLog(self._run(self._read(tenant, 0)).events, self._bounds)
            else:
                log = TenantLog(read.events, self._bounds)
        with self._lock:
            now = time.monotonic()
            # Only logs asked lately are kept (a server asked about many tenants keeps few).
            self._logs = {t: k for t, k in self._logs.items() if now - k.asked_at < self._hold_s}
            self._logs[tenant] = _Kept(log, read.end, now, now)
            current = {id(k.log) for k in self._logs.values()}
            self._views = {k: v for k, v in self._views.items() if id(v[0]) in current}
        return log

    def _read(self, tenant: str, start: int) -> Coroutine[Any, Any, TenantRead]:
        return read_tenant_log(
            self._kafka,
            self._topic,
            self._partition_of(tenant),
            tenant,
            embedding_model=self._embedder.model_id,
            default_importance=self._default_importance,
            keyring=self._keyring,
            start=start,
        )

    def history(self, tenant: str, memory_id: str) -> list[Touch]:
        """Every change to `memory_id`, oldest first; MemoryNotFoundError for an id the tenant
        never had (or had before an erasure: its log can no longer say)."""
        touches = self.log(tenant).history(memory_id)
        if not touches:
            raise MemoryNotFoundError(
                f"tenant {tenant!r}'s log never held a memory {memory_id!r}; check the id "
                "(`memstream recall --json` shows ids)"
            )
        return touches

    def view(self, tenant: str, at: datetime) -> list[Memory]:
        """The tenant's memory as it stood at `at` (what since was forgotten stays gone)."""
        log = self.log(tenant)
        return log.view(log.cutoff(at))

    def recall(
        self, tenant: str, text: str, *, at: datetime, k: int, valid_at: datetime | None = None
    ) -> list[RecalledMemory]:
        """Recall over the tenant's memory as it stood at `at` (what was believed then),
        ranked as recall ranks, facts judged by what held at `valid_at` (what was true then;
        None: at `at`, as recall then would have)."""
        log = self.log(tenant)
        view = self._view(tenant, log, log.cutoff(at))
        terms = query_terms(text)
        stats = (
            TermStats(len(view.memories), tuple(len(view.rows.get(t, ())) for t in terms))
            if terms
            else None
        )
        query = np.asarray(self._embedder.embed_query(text), dtype=np.float32)
        rows = view.candidates(query, terms, max(k, CANDIDATES))
        chosen = [view.memories[row] for row in rows]
        return rank(
            chosen,
            view.vectors[rows],
            query,
            terms,
            stats,
            self._tuning,
            k,
            lambda hits, reach: neighbours_in(
                zip(view.memories, view.vectors, strict=True), hits, reach
            ),
            lambda facts: successors(view.memories, facts),
            valid_at or at,
            text,
        )

    def diff(self, tenant: str, start: datetime, end: datetime) -> list[Diffed]:
        """What changed in the tenant's memory between `start` and `end`."""
        log = self.log(tenant)
        return log.diff(log.cutoff(start), log.cutoff(end))

    def _view(self, tenant: str, log: TenantLog, count: int) -> _View:
        with self._lock:
            kept = self._views.get((tenant, count))
            if kept is not None and kept[0] is log:
                return kept[1]
        model = self._embedder.model_id
        memories = [replace(m, embedding_model=model) for m in log.view(count)]
        known: list[Vectors | None] = []
        if memories:
            known = self._run(self._stored_vectors(tenant, memories))
        vectors = np.zeros((len(memories), self._embedder.dims), dtype=np.float32)
        missing = [i for i, v in enumerate(known) if v is None and memories[i].content]
        for i, vector in enumerate(known):
            if vector is not None:
                vectors[i] = vector
        if missing:
            vectors[missing] = self._embedder.embed_documents(
                [memories[i].content for i in missing]
            )
        rows: dict[str, list[int]] = {}
        for row, memory in enumerate(memories):
            for word in set(memory_words(memory)):
                rows.setdefault(word, []).append(row)
        view = _View(memories, vectors, rows)
        with self._lock:
            self._views[(tenant, count)] = (log, view)
        return view

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        # Its own thread and loop: the caller may be inside an event loop (the server).
        return self._pool.submit(asyncio.run, work).result()
