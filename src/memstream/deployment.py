"""The composition root: every part an entry point needs, built in one place from Settings.

A `Deployment` is one namespace on one Kafka and one projection backend. The worker, the
CLI, the server, the bench, the tests and embedding applications all get their parts here —
the stores and the memory middleware of the agent side, the projection (`projection`: one
object that hands out the writer, reader, recaller, generations, status, API-key store and
heartbeats), the replayer, the worker's app — so each part is wired once and each knob has one
default (the Settings'). Parts that hold connections or threads are made on first use and
released by `close()`; nothing connects while the Deployment is built.

It only wires: the server builds its own parts from it (`server.parts`), and what is done
with a deployment — erase a tenant, drop a namespace, run a worker — is in
`memstream.operations`. The projection is a `ProjectionBackend` (memstream.backends),
chosen by MEMSTREAM_BACKEND from `BACKENDS`: a second backend is a package and a line there.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from memstream.backends import ProjectionBackend, projection_backend
from memstream.config import Settings
from memstream.errors import ConfigurationError, InfrastructureError, InvalidInputError
from memstream.eventsourced import EventSourcedStores
from memstream.hooks import (
    ConsolidateConfig,
    RecallConfig,
    RecordConfig,
    SemanticMemoryMiddleware,
    TurnRecorder,
)
from memstream.llm import ModelClient
from memstream.memory.bounds import Bounds
from memstream.memory.cipher import MasterKeys, parse_master_key
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.manager import LLMMemoryManager, MemoryManagerConfig
from memstream.memory.model import Memory
from memstream.memory.ports import (
    ItemIndex,
    MemoryLookup,
    ProjectionProgress,
    Recaller,
    TokenLedger,
)
from memstream.memory.ranking.fusion import RecallTuning
from memstream.memory.ranking.rerank import Reranker
from memstream.memory.store import MemoryStore
from memstream.metrics import Metrics, TimedEmbedders
from memstream.processes import project_root
from memstream.providers import EmbedderCatalogue, chat_model
from memstream.streams.background_publisher import BackgroundPublisher
from memstream.streams.data_keys import KafkaKeyring
from memstream.streams.event_publisher import EventPublisher
from memstream.streams.kafka import KafkaConnection
from memstream.streams.lineage import Lineage
from memstream.streams.replay import Replayer
from memstream.streams.topics import Topics, ensure_topics, topic_partitions
from memstream.streams.wire import partition_of

if TYPE_CHECKING:
    import faust

    from memstream.streams.extraction import ExtractionParts
    from memstream.streams.summaries import SummaryParts

__all__ = ["Deployment"]

# How long a deployment routes by MEMSTREAM_PARTITIONS after it found no memory topic, before
# it asks the broker again: a sharded reader before the first write would otherwise make a
# metadata call per routed call.
_ABSENT_TOPIC_RECHECK_S = 1.0


class Deployment:
    """One namespace of one Kafka and one projection backend, and the parts that use it."""

    def __init__(self, settings: Settings, *, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.topics = Topics(settings.namespace, settings.partitions)
        self._partitions: int | None = None  # the memory topic's, once read from the broker
        self._absent_until = 0.0  # monotonic time before which the topic is taken as absent
        self.projection: ProjectionBackend = projection_backend(settings, self.partition_of)
        self.embedders = EmbedderCatalogue(settings, embedder)
        self._embedder = embedder
        self._stores: EventSourcedStores | None = None
        # This deployment's own registry (never prometheus_client's global one): serve it with
        # `prometheus_client.start_http_server(port, registry=deployment.metrics.registry)`.
        self.metrics = Metrics()
        self._keyring: KafkaKeyring | None = None
        self._recorder: TurnRecorder | None = None
        self._making = threading.Lock()
        self._lineage: Lineage | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Deployment:
        """The deployment the MEMSTREAM_* environment variables (or `environ`'s) describe."""
        return cls(Settings.from_env(environ))

    def __enter__(self) -> Deployment:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def flush(self, timeout: float) -> bool:
        """Wait until every turn the agent side has ended is in the log (recorded, then sent);
        False if `timeout` passed first (True at once when it holds nothing)."""
        deadline = time.monotonic() + timeout
        if self._recorder is not None and not self._recorder.flush(timeout):
            return False
        left = max(0.0, deadline - time.monotonic())
        return self._stores is None or self._stores.publisher.flush(left)

    def close(self, timeout: float = 10.0) -> None:
        """Record and send what the agent side still holds (up to `timeout`), then stop its
        threads."""
        if self._recorder is not None:
            self._recorder.close(timeout)
            self._recorder = None
        if self._stores is not None:
            self._stores.close(timeout)
            self._stores = None
        if self._keyring is not None:
            self._keyring.close()
            self._keyring = None
        if self._lineage is not None:
            self._lineage.close()
            self._lineage = None

    # -- models -----------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The configured embedder, loaded on first use: the model new generations of the
        projection are built with (an existing one keeps its own: `embedders`)."""
        return self.embedders.configured()

    @property
    def embedding_model(self) -> str:
        """The configured model's id, without loading the model (events carry it as
        information; it decides nothing about how they are projected)."""
        return self.embedders.configured_model

    def check_embedder(self) -> None:
        """Fail now, with a ConfigurationError naming both models and the fix, if this process
        cannot embed for the model the live projection was built with. A projection that does
        not answer is no reason to fail at start (recall skips while it is away)."""
        with contextlib.suppress(InfrastructureError):
            self.projection.check_model(self.embedders)

    def chat_model(self) -> ModelClient | None:
        """The configured chat model; None when none is configured (offline)."""
        return chat_model(self.settings)

    @cached_property
    def reranker(self) -> Reranker | None:
        """The reranker recall reads its best few again with (MEMSTREAM_RERANKER), loaded on
        first use; None when it is `none` or no memory is to be read again."""
        if self.settings.recall_rerank_depth == 0:
            return None
        # Imported when asked for: model files bring httpx, which most commands never use.
        from memstream.providers.rerankers import reranker_from_settings

        return reranker_from_settings(self.settings)

    # -- the connections ------------------------------------------------------------------------

    @cached_property
    def kafka(self) -> KafkaConnection:
        """The brokers and the security every Kafka client of this deployment uses."""
        return KafkaConnection.from_settings(self.settings)

    def partition_of(self, tenant: str) -> int:
        """The partition of the memory topic every producer writes `tenant`'s records to
        (`streams.wire.partition_of` over the topic's partition count, read from the broker
        once; MEMSTREAM_PARTITIONS while the topic does not exist yet, asked again at most
        every _ABSENT_TOPIC_RECHECK_S). The sharded projection routes a tenant to its shard
        by it."""
        return partition_of(tenant, self._partitions or self._read_partitions())

    def _read_partitions(self) -> int:
        now = time.monotonic()
        if now < self._absent_until:  # asked a moment ago: no broker call per routed call
            return self.settings.partitions

        def described() -> list[object]:
            return list(asyncio.run(topic_partitions(self.kafka, self.topics.memory)))

        # Its own thread: the caller may be inside an event loop (the server, the worker).
        with ThreadPoolExecutor(1) as pool:
            found = len(pool.submit(described).result())
        if not found:  # not created yet: nothing of any tenant is stored
            self._absent_until = now + _ABSENT_TOPIC_RECHECK_S
            return self.settings.partitions
        self._partitions = found
        return found

    # -- the agent side ---------------------------------------------------------------------

    def stores(self, *, publisher: BackgroundPublisher | None = None) -> EventSourcedStores:
        """The tenant -> store resolver of the agent side (one per deployment)."""
        if self._stores is None:
            self.check_embedder()
            self._stores = EventSourcedStores(
                publisher or BackgroundPublisher(self.kafka),
                self.topics,
                reader=self.projection.reader(),
                recaller=self.recaller(),
                embedding_model=self.embedding_model,
                keyring=self.sealer(),
            )
            self.metrics.agent.watch(self._stores.publisher)
        return self._stores

    def recorder(self) -> TurnRecorder:
        """The agent side's turn recorder (one per deployment): the thread the memory
        middleware's hooks hand their turns to (`flush` and `close` wait for it)."""
        with self._making:  # agent threads may ask for it at once: one recorder, in order
            if self._recorder is None:
                self._recorder = TurnRecorder()
            return self._recorder

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
        `metrics`, as is the hooks' time. Turns are recorded on this deployment's
        recorder thread (`hooks.recorder`): the hook only queues them."""
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
            recorder=self.recorder(),
            runs_before=runs_before,
        )

    def event_publisher(self) -> EventPublisher:
        """An asyncio publisher that waits for the broker (imports, forgets, tests)."""
        return EventPublisher(self.kafka, self.topics, keyring=self.sealer())

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
        return project_root() / state / "master.key"

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

    # -- the projection ---------------------------------------------------------------------

    def reader(self) -> MemoryLookup:
        return self.projection.reader()

    def status(self) -> ProjectionProgress:
        return self.projection.status()

    def recaller(self, embedder: Embedder | None = None) -> Recaller:
        """The recaller, ranking with the MEMSTREAM_RECALL_* knobs (the stores use this one)."""
        embedders = (
            self.embedders if embedder is None else EmbedderCatalogue(self.settings, embedder)
        )
        return self.projection.recaller(embedders, tuning=self.recall_tuning())

    def items(self) -> ItemIndex:
        """A key-value store's items: field-by-field similarity to a query, TTL refreshes."""
        return self.projection.items(self.embedders)

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
                neighbour_share=s.recall_neighbour_share,
                neighbour_reach=s.recall_neighbour_reach,
                answer_share=s.recall_answer_share,
                question_weight=s.recall_question_weight,
                rerank_depth=s.recall_rerank_depth,
                reranker=self.reranker,
            )
        except InvalidInputError as exc:
            raise ConfigurationError(
                f"{exc}: check MEMSTREAM_RECALL_IMPORTANCE_WEIGHT and "
                "MEMSTREAM_RECALL_RECENCY_WEIGHT"
            ) from None

    def lineage(self) -> Lineage:
        """A tenant's past from its partition of the log: histories, as-of views, diffs
        (docs/lineage.md), with the projection's stored vectors reused where they still fit."""
        if self._lineage is None:
            projection = self.projection

            async def stored(tenant: str, memories: Sequence[Memory]) -> list[Vectors | None]:
                async with projection.session(projection.shard_of(tenant)) as session:
                    return await session.writer.known_vectors(memories)

            self._lineage = Lineage(
                self.kafka,
                self.topics.memory,
                self.partition_of,
                self.embedder,
                stored,
                bounds=Bounds(self.settings.max_memories_per_tenant),
                tuning=self.recall_tuning(),
                default_importance=self.settings.default_importance,
                keyring=self.keyring(),
            )
        return self._lineage

    @asynccontextmanager
    async def replayer(self, shard: int = 0) -> AsyncIterator[Replayer]:
        """A replayer of projection shard `shard` (its partitions only) over a session of its
        own, closed on the way out."""
        async with self.projection.session(shard) as session:
            yield Replayer(
                self.kafka,
                self.topics,
                session.writer,
                session.generations,
                self.embedders,
                default_importance=self.settings.default_importance,
                keyring=self.keyring(),
                owns=self.projection.owns(shard),
            )

    # -- the worker -------------------------------------------------------------------------

    def worker_app(self) -> faust.App:
        from memstream.memory.consolidation import ExtractiveSummarizer
        from memstream.streams.worker import build_app

        keyring = self.keyring()
        return build_app(
            self.settings,
            self.topics,
            TimedEmbedders(self.embedders, self.metrics.worker.embedding),
            self.projection,
            self.projection.reader(),
            self.chat_model() or ExtractiveSummarizer(),
            metrics=self.metrics,
            keyring=keyring,
            sealer=self.sealer(),
            keys_clock=keyring.tick if keyring is not None else None,
            extraction=self.extraction(),
            summaries=self.summaries(),
        )

    def token_ledger(self) -> TokenLedger:
        """Tokens model calls spent per day, tenant and purpose (extraction's budget, stats)."""
        return self.projection.token_ledger()

    def summaries(self) -> SummaryParts:
        """The summary-view job's parts: the chat model, if one is configured."""
        from memstream.streams.summaries import SummaryParts

        client = self.chat_model()
        model = self.settings.chat_model if client is not None else ""
        return SummaryParts(
            client,
            model,
            self.reader(),
            self.status(),
            refresh_s=self.settings.summary_refresh_minutes * 60,
            partition_of=self.partition_of,
        )

    def extraction(self) -> ExtractionParts | None:
        """The extraction job's parts (MEMSTREAM_EXTRACTION); None when it is off."""
        from memstream.memory.extraction import Extracting, Strategy, extraction_tenants
        from memstream.streams.extraction import ExtractionParts

        settings = self.settings
        if settings.extraction == "off":
            return None
        client = self.chat_model()
        if client is None:
            raise ConfigurationError(
                f"MEMSTREAM_EXTRACTION={settings.extraction} needs a chat model: set "
                "MEMSTREAM_CHAT_BASE_URL and MEMSTREAM_CHAT_MODEL to an OpenAI-compatible API "
                "(OpenAI, Ollama's /v1, vLLM, llama.cpp's server), or MEMSTREAM_EXTRACTION=off"
            )
        return ExtractionParts(
            client,
            settings.chat_model,
            extraction_tenants(
                settings.extraction_tenants,
                Extracting(Strategy(settings.extraction), settings.extraction_prompt),
            ),
            self.status(),
            self.reader(),
            self.token_ledger(),
            daily_tokens=settings.extraction_daily_tokens,
            concurrency=settings.extraction_concurrency,
        )

    async def ensure_topics(self) -> None:
        await ensure_topics(self.kafka, self.topics)

    # -- the namespace ----------------------------------------------------------------------

    def with_namespace(self, namespace: str, **changes: object) -> Deployment:
        """The same servers under another namespace (and other settings `changes`)."""
        settings = dataclasses.replace(self.settings, namespace=namespace, **changes)  # type: ignore[arg-type]
        other = Deployment(settings, embedder=self._embedder)
        if not any(name.startswith("embedd") for name in changes):
            other.embedders = self.embedders  # the models loaded already, not loaded again
        return other
