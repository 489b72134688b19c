"""The composition root: every part an entry point needs, built in one place from Settings.

A `Deployment` is one namespace on one Kafka and one Redis. The worker, the CLI, the bench,
the tests and embedding applications all get their parts here — the stores and the memory
middleware of the agent side, the projection's writer, reader, recaller and generations, the
replayer, the worker's app — so each part is wired once and each knob has one default (the
Settings'). Parts that hold connections or threads are made on first use and released by
`close()`; nothing connects while the Deployment is built.

A second projection backend is a package with the projection ports (`memory.ports`) and a
few lines here; nothing above this module names Redis or Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import redis
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from memstream.config import Settings
from memstream.errors import ConfigurationError, InvalidInputError, ProjectionLagError, StackError
from memstream.eventsourced import EventSourcedStores
from memstream.health import Heartbeat, LastError, ProcessReport, heartbeats
from memstream.hooks import ConsolidateConfig, RecallConfig, RecordConfig, SemanticMemoryMiddleware
from memstream.llm import ModelClient
from memstream.memory.cipher import MasterKeys, parse_master_key
from memstream.memory.embeddings import Embedder
from memstream.memory.events import MemoryEvent, TenantErased
from memstream.memory.manager import LLMMemoryManager, MemoryManagerConfig
from memstream.memory.store import MemoryStore
from memstream.memory.tenancy import validate_tenant
from memstream.metrics import Metrics, TimedEmbedder
from memstream.processes import project_root, running
from memstream.projections.connection import (
    RedisConnection,
    async_redis_client,
    compact,
    is_missing_index,
    redis_client,
    redis_errors,
    rewrite_persistence,
)
from memstream.projections.fusion import RecallTuning
from memstream.projections.generations import RedisGenerations
from memstream.projections.reader import ProjectionReader
from memstream.projections.recall import RedisRecaller
from memstream.projections.schema import Keyspace
from memstream.projections.status import ProjectionStatus
from memstream.projections.writer import RedisProjectionWriter
from memstream.providers import chat_model, embedder_from_settings, embedding_model_id
from memstream.streams.kafka import KafkaConnection
from memstream.streams.keys import KafkaKeyring
from memstream.streams.publisher import EventPublisher
from memstream.streams.replay import Replayer
from memstream.streams.sender import BackgroundPublisher
from memstream.streams.topics import Topics, end_offsets, ensure_topics

if TYPE_CHECKING:
    import faust

    from memstream.server.keys import ApiKeys
    from memstream.server.service import MemoryService

__all__ = ["Deployment", "Erasure"]

_WORKER_READY_S = 90.0


@dataclass(frozen=True, slots=True)
class Erasure:
    """What erasing a tenant did: its event, the data keys destroyed, the Redis files
    rewritten, and whether the log was sealed at all (False: encryption was never set up, so
    the log's plaintext was not reached)."""

    event: TenantErased
    destroyed: tuple[str, ...]
    rewritten: tuple[str, ...]
    sealed: bool


class Deployment:
    """One namespace of one Kafka and one Redis, and the parts that use it."""

    def __init__(self, settings: Settings, *, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.topics = Topics(settings.namespace, settings.partitions)
        self.keys = Keyspace(settings.namespace)
        self._embedder = embedder
        self._stores: EventSourcedStores | None = None
        # This deployment's own registry (never prometheus_client's global one): serve it with
        # `prometheus_client.start_http_server(port, registry=deployment.metrics.registry)`.
        self.metrics = Metrics()
        self._keyring: KafkaKeyring | None = None

    @classmethod
    def from_env(cls) -> Deployment:
        """The deployment the MEMSTREAM_* environment variables describe."""
        return cls(Settings.from_env())

    def __enter__(self) -> Deployment:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self, timeout: float = 10.0) -> None:
        """Send what the agent side still buffers (up to `timeout`), then stop its threads."""
        if self._stores is not None:
            self._stores.close(timeout)
            self._stores = None
        if self._keyring is not None:
            self._keyring.close()
            self._keyring = None

    # -- models -----------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The configured embedder, loaded on first use."""
        if self._embedder is None:
            self._embedder = embedder_from_settings(self.settings)
        return self._embedder

    @property
    def embedding_model(self) -> str:
        """The model id events are recorded for, without loading the model."""
        if self._embedder is not None:
            return self._embedder.model_id
        return embedding_model_id(self.settings)

    def chat_model(self) -> ModelClient | None:
        """The configured chat model; None when none is configured (offline)."""
        return chat_model(self.settings)

    # -- the connections ------------------------------------------------------------------------

    @cached_property
    def kafka(self) -> KafkaConnection:
        """The brokers and the security every Kafka client of this deployment uses."""
        return KafkaConnection.from_settings(self.settings)

    @cached_property
    def redis_connection(self) -> RedisConnection:
        """The Redis URL, ACL user and TLS files every Redis client of this deployment uses."""
        return RedisConnection.from_settings(self.settings)

    # -- the agent side ---------------------------------------------------------------------

    def stores(self, *, publisher: BackgroundPublisher | None = None) -> EventSourcedStores:
        """The tenant -> store resolver of the agent side (one per deployment)."""
        if self._stores is None:
            self._stores = EventSourcedStores(
                publisher or BackgroundPublisher(self.kafka),
                self.topics,
                reader=self.reader(),
                recaller=self.recaller(),
                embedding_model=self.embedding_model,
                keyring=self.sealer(),
            )
            self.metrics.agent.watch(self._stores.publisher)
        return self._stores

    def manager(self, store: MemoryStore, client: ModelClient) -> LLMMemoryManager:
        """The memory manager over a tenant's store, with the configured default importance."""
        config = MemoryManagerConfig(default_importance=self.settings.default_importance)
        return LLMMemoryManager(config, store, client)

    def memory_middleware(
        self,
        client: ModelClient,
        *,
        recall: RecallConfig | None = None,
        record: RecordConfig | None = None,
        consolidate: ConsolidateConfig | None = None,
        runs_before: frozenset[str] = frozenset(),
    ) -> SemanticMemoryMiddleware:
        """The memory middleware over this deployment's stores: recall and record are on
        (`record` cut to MEMSTREAM_MAX_RECORD_CHARS unless given), consolidation only when
        `consolidate` is given, Skipped announced on the monitoring topic and counted in
        `metrics`, as is the hooks' time."""
        stores = self.stores()
        return SemanticMemoryMiddleware(
            stores=stores,
            client=client,
            manager=self.manager,
            recall=recall or RecallConfig(),
            record=record or RecordConfig(max_record_chars=self.settings.max_record_chars),
            consolidate=consolidate,
            monitor=self.metrics.monitor(stores.monitor),
            timer=self.metrics.agent,
            runs_before=runs_before,
        )

    def event_publisher(self) -> EventPublisher:
        """An asyncio publisher that waits for the broker (imports, forgets, tests)."""
        return EventPublisher(self.kafka, self.topics, keyring=self.sealer())

    # -- the server (the `server` extra) ------------------------------------------------------

    def api_keys(self) -> ApiKeys:
        """The server's API keys (stored hashed under the namespace)."""
        from memstream.server.keys import ApiKeys

        return ApiKeys(self.redis, self.settings.namespace, url=self.settings.redis)

    @asynccontextmanager
    async def memory_service(self) -> AsyncIterator[MemoryService]:
        """What the HTTP API and the MCP tools do, over this deployment, its producer started."""
        from memstream.projections.search import FilteredSearch
        from memstream.server.mapping import Scoping
        from memstream.server.service import Limits, MemoryService

        settings = self.settings
        await self.ensure_topics()
        async with self.event_publisher() as publisher:
            yield MemoryService(
                publisher=publisher,
                search=FilteredSearch(self.redis, self.keys, self.embedder, url=settings.redis),
                reader=self.reader(),
                status=self.status(),
                scoping=Scoping(
                    tenant_field=settings.server_tenant_field,
                    default_importance=settings.default_importance,
                    max_record_chars=settings.max_record_chars,
                ),
                limits=Limits(
                    max_records=settings.server_max_records,
                    max_query_chars=settings.server_max_query_chars,
                    max_wait_s=settings.server_max_wait_s,
                ),
                embedding_model=self.embedding_model,
            )

    # -- erasure: the tenants' data keys (docs/erasure.md) -----------------------------------

    def master_keys(self) -> MasterKeys:
        """The master key (MEMSTREAM_MASTER_KEY, else MEMSTREAM_MASTER_KEY_FILE, else the local
        stack's development key) and the older ones a rotation still accepts."""
        settings = self.settings
        previous = tuple(
            parse_master_key(raw, "each of MEMSTREAM_PREVIOUS_MASTER_KEYS")
            for raw in settings.previous_master_keys.split(",")
            if raw.strip()
        )
        if settings.master_key:
            return MasterKeys(
                parse_master_key(settings.master_key, "MEMSTREAM_MASTER_KEY"), previous
            )
        path = self._master_key_file()
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError:
            raise ConfigurationError(
                f"no master key: MEMSTREAM_MASTER_KEY is unset and {path} cannot be read. Set "
                "MEMSTREAM_MASTER_KEY (32 random bytes, base64) or MEMSTREAM_MASTER_KEY_FILE; "
                "`memstream up` makes a development key for the local stack; "
                "MEMSTREAM_ENCRYPTION=off writes plaintext (docs/erasure.md)"
            ) from None
        return MasterKeys(parse_master_key(raw, f"the master key in {path}"), previous)

    def _master_key_file(self) -> Path:
        if self.settings.master_key_file:
            return Path(self.settings.master_key_file)
        state = Path(self.settings.state_dir)
        if state.is_absolute():
            return state / "master.key"
        try:
            return project_root() / state / "master.key"
        except StackError:
            return Path.cwd() / state / "master.key"

    def keyring(self) -> KafkaKeyring | None:
        """The tenants' data keys (the keys topic), which open sealed events. With encryption
        off it is None unless a master key is found (sealed events then fail to decode, while
        plaintext ones read as ever); with it on, a missing key is a ConfigurationError."""
        settings = self.settings
        if self._keyring is None:
            try:
                masters = self.master_keys()
            except ConfigurationError:
                if settings.encryption:
                    raise
                return None
            self._keyring = KafkaKeyring(
                self.kafka, self.topics, masters, stale_s=settings.keys_refresh_s
            )
        return self._keyring

    def sealer(self) -> KafkaKeyring | None:
        """The keyring writers seal with: the keyring when MEMSTREAM_ENCRYPTION is on, else
        None (plaintext)."""
        return self.keyring() if self.settings.encryption else None

    def erase_tenant(self, tenant: str, *, timeout_s: float = 120.0) -> Erasure:
        """Crypto-shred `tenant` (`memstream forget --tenant T --erase`, docs/erasure.md):
        destroy its data keys (tombstones in the keys topic, gone from disk once compacted),
        write a TenantErased event, wait until the live projection has deleted the tenant's
        memories, then rewrite Redis's files so their plaintext copy is gone from its disk.
        Idempotent: running it again destroys what keys the tenant has since made."""
        validate_tenant(tenant)
        keyring = self.keyring()
        destroyed = keyring.erase(tenant) if keyring is not None else []
        event = TenantErased(
            tenant=tenant,
            request_id=uuid.uuid4().hex,
            requested_at=datetime.now(UTC),
            key_ids=tuple(destroyed),
        )

        async def publish() -> None:
            await self.ensure_topics()
            # TenantErased has no sealed fields: it names no content and stays readable.
            async with self.event_publisher() as publisher:
                await publisher.publish([event])

        asyncio.run(publish())
        if self.status().wait_applied([event], timeout_s):
            raise ProjectionLagError(
                f"the erasure of tenant {tenant!r} is in the log (its keys are destroyed) but no "
                f"worker applied it within {timeout_s:.0f}s, so Redis's files were not rewritten; "
                "start a worker (`memstream worker`) and run the erasure again"
            )
        with redis_errors(self.settings.redis, "rewriting Redis's files"):
            rewritten = rewrite_persistence(self.redis, timeout_s)
        return Erasure(event, tuple(destroyed), tuple(rewritten), sealed=keyring is not None)

    # -- the projection ---------------------------------------------------------------------

    @cached_property
    def redis(self) -> Redis:
        return redis_client(self.redis_connection)

    def async_redis(self) -> AsyncRedis:
        """A new asyncio client: one belongs to one event loop, so each caller makes its own."""
        return async_redis_client(self.redis_connection)

    def status(self) -> ProjectionStatus:
        return ProjectionStatus(self.redis, self.keys, url=self.settings.redis)

    def reader(self) -> ProjectionReader:
        return ProjectionReader(self.redis, self.keys, url=self.settings.redis)

    def recaller(
        self, embedder: Embedder | None = None, *, deduplicate: bool = True
    ) -> RedisRecaller:
        """The recaller, ranking with the MEMSTREAM_RECALL_* knobs (the stores use this one).
        `deduplicate=False` keeps memories that restate a better-ranked one in the list (the
        LangGraph store: each item is its own, however alike the values)."""
        return RedisRecaller(
            self.redis,
            self.keys,
            embedder or self.embedder,
            url=self.settings.redis,
            tuning=self.recall_tuning(),
            deduplicate=deduplicate,
        )

    def recall_tuning(self) -> RecallTuning:
        """Recall's ranking knobs, from the MEMSTREAM_RECALL_* settings."""
        s = self.settings
        try:
            return RecallTuning(
                vector_weight=s.recall_vector_weight,
                importance_weight=s.recall_importance_weight,
                recency_weight=s.recall_recency_weight,
                recency_half_life_days=s.recall_recency_half_life_days,
                duplicate_similarity=s.recall_duplicate_similarity,
            )
        except InvalidInputError as exc:
            raise ConfigurationError(
                f"{exc}: check MEMSTREAM_RECALL_IMPORTANCE_WEIGHT and "
                "MEMSTREAM_RECALL_RECENCY_WEIGHT"
            ) from None

    def writer(
        self, client: AsyncRedis, *, max_memories: int | None = None
    ) -> RedisProjectionWriter:
        settings = self.settings
        bound = settings.max_memories_per_tenant if max_memories is None else max_memories
        return RedisProjectionWriter(client, self.keys, max_memories=bound, url=settings.redis)

    def generations(self, client: AsyncRedis) -> RedisGenerations:
        return RedisGenerations(client, self.keys, url=self.settings.redis)

    @asynccontextmanager
    async def replayer(self) -> AsyncIterator[Replayer]:
        client = self.async_redis()
        try:
            yield Replayer(
                self.kafka,
                self.topics,
                self.writer(client),
                self.generations(client),
                self.embedder,
                default_importance=self.settings.default_importance,
                keyring=self.keyring(),
            )
        finally:
            await client.aclose()

    # -- the worker -------------------------------------------------------------------------

    def worker_app(self) -> faust.App:
        from memstream.memory.consolidation import ExtractiveSummarizer
        from memstream.streams.worker import build_app

        keyring = self.keyring()
        return build_app(
            self.settings,
            self.topics,
            TimedEmbedder(self.embedder, self.metrics.worker.embedding),
            self.writer(self.async_redis()),
            self.reader(),
            self.chat_model() or ExtractiveSummarizer(),
            metrics=self.metrics,
            keyring=keyring,
            sealer=self.sealer(),
            keys_clock=keyring.tick if keyring is not None else None,
        )

    def run_worker(self, *, loglevel: str = "info", metrics_port: int | None = None) -> None:
        """Create the topics if needed, then run the worker until SIGINT or SIGTERM: its
        metrics served on `metrics_port` (default MEMSTREAM_WORKER_METRICS_PORT; 0: not
        served), its lag and last error kept for `memstream status` (a heartbeat in Redis)."""
        from memstream.streams.worker import run_app

        port = self.settings.worker_metrics_port if metrics_port is None else metrics_port
        asyncio.run(self.ensure_topics())
        app = self.worker_app()
        stop_serving = self.metrics.serve(port, self.settings.worker_metrics_host) if port else None
        errors = LastError()
        lag = self.metrics.worker
        beat = self.heartbeat("worker", errors, lag=lambda: lag.total_lag, metrics_port=port)
        beat.start()
        try:
            run_app(app, loglevel=loglevel, loghandlers=[errors])
        finally:
            beat.stop()
            if stop_serving is not None:
                stop_serving()

    async def ensure_topics(self) -> None:
        await ensure_topics(self.kafka, self.topics)

    # -- health (`memstream status`) --------------------------------------------------------

    def heartbeat(
        self,
        kind: str,
        errors: LastError,
        *,
        lag: Callable[[], int | None] = lambda: None,
        metrics_port: int = 0,
    ) -> Heartbeat:
        """This process's heartbeat under the namespace (its kind, lag, last error and
        metrics port), for `memstream status`; start it, and stop it on the way out."""
        return Heartbeat(
            self.redis,
            self.keys,
            kind,
            errors=errors,
            lag=lag,
            metrics_port=metrics_port or None,
        )

    def processes(self) -> list[ProcessReport]:
        """The processes of this namespace that beat lately (workers, servers)."""
        with redis_errors(self.settings.redis, "reading the processes' heartbeats"):
            return heartbeats(self.redis, self.keys)

    def projection_lag(self) -> dict[int, int]:
        """Per partition of the memory topic: messages the live projection has not applied."""
        topic = self.topics.memory
        positions = self.status().positions()
        ends = asyncio.run(end_offsets(self.kafka, topic))
        return {p: max(end - positions.get(f"{topic}/{p}", -1) - 1, 0) for p, end in ends.items()}

    def worker_process(
        self, log: Path, probe: MemoryEvent, *, loglevel: str = "info", metrics_port: int = 0
    ) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
        """A `memstream worker` process on this namespace, projecting (it has applied `probe`)
        when the block starts and stopped when it ends (serving its metrics on
        `metrics_port` when given). Tests and benches use it."""

        async def publish() -> None:
            await self.ensure_topics()  # a fresh namespace has none until a worker starts
            async with self.event_publisher() as publisher:
                await publisher.publish([probe])

        asyncio.run(publish())
        status = self.status()
        serve = ["--metrics-port", str(metrics_port)] if metrics_port else []
        return running(
            [sys.executable, "-m", "memstream", "worker", "--loglevel", loglevel, *serve],
            env={**os.environ, **self.settings.environ()},
            log=log,
            ready=lambda: not status.unapplied([probe]),
            what=f"the worker of namespace {self.settings.namespace}",
            timeout_s=_WORKER_READY_S,
        )

    # -- the namespace ----------------------------------------------------------------------

    def with_namespace(self, namespace: str, **changes: object) -> Deployment:
        """The same servers under another namespace (and other settings `changes`)."""
        settings = dataclasses.replace(self.settings, namespace=namespace, **changes)  # type: ignore[arg-type]
        return Deployment(settings, embedder=self._embedder)

    def drop(self) -> None:
        """Delete everything of this namespace: every generation's index and keys, and its
        topics. For tests and benches; irreversible."""
        client = self.redis
        prefixes = (f"{self.keys.namespace}:", f"{self.keys.namespace}-")
        for raw in client.execute_command("FT._LIST"):  # type: ignore[no-untyped-call]
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            if name.startswith(prefixes):
                try:
                    client.ft(name).dropindex(delete_documents=False)
                except redis.ResponseError as exc:  # dropped by someone else meanwhile
                    if not is_missing_index(exc):
                        raise
        deleted = 0
        for prefix in prefixes:
            batch = []
            for key in client.scan_iter(match=f"{prefix}*", count=5000):
                batch.append(key)
                if len(batch) >= 5000:
                    deleted += int(client.unlink(*batch))
                    batch.clear()
            if batch:
                deleted += int(client.unlink(*batch))
        compact(client, deleted)  # keeps Redis's restarts short (docs/operations.md)
        with contextlib.suppress(KafkaError):  # the keys are gone; a topic left is harmless
            asyncio.run(self._delete_topics())

    async def _delete_topics(self) -> None:
        admin = AIOKafkaAdminClient(**self.kafka.aiokafka())
        await admin.start()
        try:
            existing = set(await admin.list_topics())
            names = [spec.name for spec in self.topics.specs() if spec.name in existing]
            if names:
                await admin.delete_topics(names)
        finally:
            await admin.close()
