"""The projection backend as a type: `ProjectionBackend`, all that the composition root,
operations, the server and the CLI ask of the store that holds the projection, and `BACKENDS`,
the registry that picks one by name (`MEMSTREAM_BACKEND`, as faust's `by_url` picks a driver).

A backend is one package that implements the protocol over the domain's ports
(`memory.ports`) plus one line here; none of its clients leaves it (a bench that measures
against raw Redis makes its own). The agent runtime's durable journal is the one port that is
not the domain's (`agent.journal`): it lives beside the projection because the projection's
store is the durable store a deployment has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from importlib import import_module
from typing import TYPE_CHECKING, Protocol

from memstream.agent.journal import Journal
from memstream.config import Settings
from memstream.errors import ConfigurationError
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

__all__ = ["BACKENDS", "ProjectionBackend", "projection_backend"]

if TYPE_CHECKING:
    from memstream.inmemory.backend import InMemoryProjection
    from memstream.projections.backend import RedisProjection


class ProjectionBackend(Protocol):
    """One namespace's projection, over one store or its shards. Nothing connects until a
    part is used."""

    # -- the layout: which shard holds which tenant --------------------------------------

    def current_layout(self) -> ShardLayout: ...

    def shard_of(self, tenant: str) -> int: ...

    def owns(self, shard: int) -> Callable[[int], bool]:
        """Whether a partition's events and position belong on `shard` (of the layout now)."""
        ...

    def resharding(self) -> Resharding: ...

    # -- writing: the worker, a rebuild, a check -----------------------------------------

    def live_writer(self, url: str) -> tuple[ProjectionWriter, Generations]:
        """Shard `url`'s writer and the generations it reads, for the process's life."""
        ...

    def session(
        self, shard: int | str = 0, *, max_memories: int | None = None
    ) -> AbstractAsyncContextManager[ProjectionSession]:
        """A shard's (a number of the layout now, or a URL) writer, generations and comparer
        on one connection, closed on the way out."""
        ...

    # -- reading ------------------------------------------------------------------------------

    def reader(self) -> MemoryLookup: ...

    def recaller(self, embedders: Embedders, *, tuning: RecallTuning) -> Recaller: ...

    def items(self, embedders: Embedders) -> ItemIndex: ...

    def search(self, embedders: Embedders, *, tuning: RecallTuning) -> MemorySearch: ...

    def check_model(self, embedders: Embedders) -> None:
        """Raise ConfigurationError if `embedders` cannot make the live generation's vectors."""
        ...

    def status(self) -> ProjectionProgress: ...

    def shard_reports(self) -> list[ShardReport]: ...

    def tombstones(self) -> TombstoneReader: ...

    # -- what else a deployment keeps there ----------------------------------------------

    def api_keys(self) -> ApiKeyStore: ...

    def working_memory(self) -> WorkingMemoryStore: ...

    def processes(self) -> ProcessRegistry: ...

    def token_ledger(self) -> TokenLedger: ...

    def journal(self) -> Journal: ...

    # -- namespace-wide chores ----------------------------------------------------------

    def rewrite_files(self, timeout_s: float, tenant: TenantId | None = None) -> list[str]:
        """Make deleted data leave the store's disks (after an erasure); what was rewritten."""
        ...

    def access_command(self, role: str) -> str | None:
        """The command that gives `role` its rights on the store (None: it needs none)."""
        ...

    def drop(self) -> None:
        """Delete everything of the namespace's projection. Irreversible."""
        ...


# name -> (module, factory), imported only when chosen; a factory takes the settings and the
# producers' tenant -> partition function, and returns the backend.
BACKENDS: Mapping[str, tuple[str, str]] = {
    "redis": ("memstream.projections.backend", "RedisProjection"),
    # For tests and embedding: one process's memory, shared by its deployments of a namespace.
    "memory": ("memstream.inmemory.backend", "InMemoryProjection"),
}


def projection_backend(settings: Settings, partition_of: Callable[[str], int]) -> ProjectionBackend:
    """The backend `settings.backend` names, made for `settings`."""
    try:
        module, factory = BACKENDS[settings.backend]
    except KeyError:
        raise ConfigurationError(
            f"MEMSTREAM_BACKEND={settings.backend!r} names no projection backend; "
            f"choose one of {', '.join(sorted(BACKENDS))}"
        ) from None
    made: ProjectionBackend = getattr(import_module(module), factory)(settings, partition_of)
    return made


if TYPE_CHECKING:  # mypy checks here that each registered backend is one

    def _redis(backend: RedisProjection) -> ProjectionBackend:
        return backend

    def _memory(backend: InMemoryProjection) -> ProjectionBackend:
        return backend
