"""The in-memory projection as one object: `InMemoryProjection(settings, partition_of)`, a
`memstream.backends.ProjectionBackend` over the state of `settings.namespace` in this process
(`inmemory.state`).

It has one shard (`memory://{namespace}`), so it routes nothing and cannot be resharded; its
generations, writer, readers, recall, search, status, tombstones, API keys, working memory,
heartbeats and journal are the Redis projection's ports with the Redis projection's
semantics, which the backend contract suite (tests/contract/backend_contract.py) checks on
both. It is for tests and for embedding memstream in one process: nothing of it reaches
another process, so a worker must run in the same one (`memstream.testing.memory` applies
events through the worker's projector, in process).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from memstream.agent.journal import Journal
from memstream.config import Settings
from memstream.errors import ConfigurationError
from memstream.inmemory.generations import InMemoryComparer, InMemoryGenerations
from memstream.inmemory.live import LiveReads
from memstream.inmemory.reader import InMemoryItems, InMemoryReader, InMemoryTombstones
from memstream.inmemory.recall import InMemoryRecaller, InMemorySearch
from memstream.inmemory.state import namespace
from memstream.inmemory.status import InMemoryStatus
from memstream.inmemory.stores import (
    InMemoryApiKeys,
    InMemoryProcesses,
    InMemoryTokenLedger,
    InMemoryWorkingMemory,
)
from memstream.inmemory.writer import InMemoryWriter
from memstream.memory.embeddings import Embedders
from memstream.memory.ports import (
    ApiKeyStore,
    Generations,
    ItemIndex,
    MemoryLookup,
    ProcessRegistry,
    ProjectionProgress,
    ProjectionSession,
    ProjectionWriter,
    Recaller,
    Resharding,
    ShardLayout,
    ShardReport,
    TokenLedger,
    TombstoneReader,
    WorkingMemoryStore,
)
from memstream.memory.ranking.fusion import RecallTuning
from memstream.memory.search import MemorySearch
from memstream.memory.tenancy import TenantId

__all__ = ["InMemoryProjection"]


class InMemoryProjection:
    """One namespace's projection in this process's memory. `partition_of` is not asked:
    there is one shard."""

    def __init__(self, settings: Settings, partition_of: Callable[[str], int]) -> None:
        self.settings = settings
        self._state = namespace(settings.namespace)
        self._layout = ShardLayout((f"memory://{settings.namespace}",))

    # -- the layout: one shard ----------------------------------------------------------------

    def current_layout(self) -> ShardLayout:
        return self._layout

    def shard_of(self, tenant: str) -> int:
        return 0

    def owns(self, shard: int) -> Callable[[int], bool]:
        return lambda partition: shard == 0

    def resharding(self) -> Resharding:
        raise ConfigurationError(
            "the in-memory backend (MEMSTREAM_BACKEND=memory) has one shard and cannot be "
            "resharded; reshard a Redis projection (MEMSTREAM_BACKEND=redis)"
        )

    # -- writing ------------------------------------------------------------------------------

    def live_writer(self, url: str) -> tuple[ProjectionWriter, Generations]:
        return self._writer(None), InMemoryGenerations(self._state)

    @asynccontextmanager
    async def session(
        self, shard: int | str = 0, *, max_memories: int | None = None
    ) -> AsyncIterator[ProjectionSession]:
        yield ProjectionSession(
            writer=self._writer(max_memories),
            generations=InMemoryGenerations(self._state),
            comparer=InMemoryComparer(self._state),
        )

    def _writer(self, max_memories: int | None) -> InMemoryWriter:
        bound = self.settings.max_memories_per_tenant if max_memories is None else max_memories
        return InMemoryWriter(self._state, max_memories=bound)

    # -- reading ------------------------------------------------------------------------------

    def reader(self) -> MemoryLookup:
        return InMemoryReader(self._state)

    def recaller(self, embedders: Embedders, *, tuning: RecallTuning) -> Recaller:
        return InMemoryRecaller(self._state, embedders, tuning=tuning)

    def items(self, embedders: Embedders) -> ItemIndex:
        return InMemoryItems(self._state, embedders)

    def search(self, embedders: Embedders, *, tuning: RecallTuning) -> MemorySearch:
        recaller = InMemoryRecaller(self._state, embedders, tuning=tuning)
        return InMemorySearch(self._state, embedders, recaller)

    def check_model(self, embedders: Embedders) -> None:
        """Raise ConfigurationError if `embedders` cannot embed for the live generation's
        model (the configured one, before any index)."""
        embedders.for_model(LiveReads(self._state, embedders).model())

    def status(self) -> ProjectionProgress:
        return InMemoryStatus(self._state)

    def shard_reports(self) -> list[ShardReport]:
        status = InMemoryStatus(self._state)
        return [
            ShardReport(
                0,
                self._layout.urls[0],
                reachable=True,
                generation=status.live_generation(),
                memories=sum(s.memories for s in status.tenant_stats()),
                positions=status.positions(),
            )
        ]

    def tombstones(self) -> TombstoneReader:
        return InMemoryTombstones(self._state)

    # -- what else a deployment keeps ---------------------------------------------------------

    def api_keys(self) -> ApiKeyStore:
        return InMemoryApiKeys(self._state)

    def working_memory(self) -> WorkingMemoryStore:
        return InMemoryWorkingMemory(self._state)

    def processes(self) -> ProcessRegistry:
        return InMemoryProcesses(self._state)

    def token_ledger(self) -> TokenLedger:
        return InMemoryTokenLedger(self._state)

    def journal(self) -> Journal:
        return self._state.journal

    # -- namespace-wide chores ----------------------------------------------------------------

    def rewrite_files(self, timeout_s: float, tenant: TenantId | None = None) -> list[str]:
        """Nothing: no file holds the in-memory projection."""
        return []

    def access_command(self, role: str) -> str | None:
        """None: the in-memory projection has no store to give rights on."""
        return None

    def drop(self) -> None:
        """Forget everything of the namespace in this process."""
        self._state.clear()
