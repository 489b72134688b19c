"""The projection's ports: what the rest of memstream asks of a projection backend.

The worker's projector and the replayer apply events through `ProjectionWriter` and move
generations through `Generations`; the agent side's stores read through `MemoryReader` and
`Recaller`; the HTTP API and the LangGraph store look memories up by id (`MemoryLookup`; the
API's writes check for tombstones through `TombstoneReader`, on its event loop), and
the store scores its items field by field and refreshes their TTLs (`ItemIndex`);
`--wait`, `stats` and `verify` ask `ProjectionProgress` what is applied; the server's API keys
live in an `ApiKeyStore`, the processes' heartbeats in a `ProcessRegistry`, sessions' working
memory in a `WorkingMemoryStore`, and `verify` compares generations through a
`GenerationComparer`. One backend object hands them all out
(`memstream.projections.backend.RedisProjection`); a second backend is a package with such an
object, built in `memstream.deployment`. The value types that cross the seam live here with
the protocols.

Every port raises memstream's errors (`memstream.errors`), never its driver's: a backend that
cannot be reached raises an `InfrastructureError`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Protocol, TypeVar

from memstream.memory.embeddings import Vectors
from memstream.memory.events import MemoryEvent
from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.store import MemoryFilter
from memstream.memory.tenancy import TenantId

__all__ = [
    "LAG_HISTORY",
    "MAX_RECALL_K",
    "ApiKeyStore",
    "AppliedOutcome",
    "Difference",
    "Embedded",
    "EventRef",
    "GenerationComparer",
    "Generations",
    "Identified",
    "ItemIndex",
    "LagSeries",
    "Marked",
    "MemoryLookup",
    "MemoryReader",
    "Position",
    "PositionsBehind",
    "ProcessRegistry",
    "ProcessReport",
    "ProjectionProgress",
    "ProjectionSession",
    "ProjectionWriter",
    "Recaller",
    "ShardLayout",
    "ShardReport",
    "ShardWriters",
    "StoredSession",
    "SwapResult",
    "TenantStats",
    "TokenLedger",
    "TombstoneReader",
    "WorkingMemoryStore",
]


@dataclass(frozen=True, slots=True)
class Position:
    """Where an event sits in the log."""

    topic: str
    partition: int
    offset: int

    @property
    def field(self) -> str:
        return f"{self.topic}/{self.partition}"


@dataclass(frozen=True, slots=True)
class Embedded:
    """An event ready to apply: its memories and one vector per memory, in the same order;
    `facets`, where given, one matrix per memory of its facets' vectors (a row per facet)."""

    event: MemoryEvent
    memories: tuple[Memory, ...]
    vectors: Vectors
    position: Position | None = None
    facets: tuple[Vectors, ...] = ()


@dataclass(frozen=True, slots=True)
class AppliedOutcome:
    """What applying an event did (or, for a repeat, what it did the first time).

    `memory_ids` were written; `removed` were forgotten or replaced by a summary; a skipped
    consolidation says why in `skipped` and names the `missing` members. `evicted` is only
    known when `applied_now`.
    """

    event: MemoryEvent
    applied_now: bool
    memory_ids: tuple[str, ...]
    evicted: tuple[str, ...]
    removed: tuple[str, ...] = ()
    skipped: str = ""
    missing: tuple[str, ...] = ()

    @property
    def event_id(self) -> str:
        return self.event.id


class SwapResult(enum.IntEnum):
    SWAPPED = 1
    BEHIND = 0  # the live generation has taken in offsets the rebuild has not: read on
    STALE = -1  # another rebuild was swapped in since this one started


class PositionsBehind(Exception):
    """The projection's positions are behind what a batch follows: Redis lost writes the log
    holds as consumed. Nothing of the batch was applied; the caller reads the gap again from
    the log (streams.heal) and applies the batch after it."""


class ProjectionWriter(Protocol):
    """Applies events once, with each tenant's bound, to the live generation or `into` the
    one a rebuild writes; records the log positions it has taken into account."""

    async def ensure_live_index(self, embedding_model: str, dims: int) -> int: ...

    async def ensure_index(
        self, embedding_model: str, dims: int, generation: int, *, like: int | None = None
    ) -> None:
        """`generation`'s index, made for `embedding_model`; `like` names a generation whose
        storage a new one copies (a one-tenant rebuild's keys are renamed into it)."""
        ...

    async def apply(
        self,
        batch: Sequence[Embedded],
        *,
        into: int | None = None,
        while_live: int | None = None,
        follows: Mapping[str, int] | None = None,
    ) -> list[AppliedOutcome]:
        """Apply `batch` to the live generation, or `into` a rebuild's. With `while_live`,
        only while that generation is live: the outcomes are then a prefix of `batch`, and
        the caller applies the rest to the new live one (its vectors may be of another model).
        With `follows` ("topic/partition" -> the offset before the batch's first message
        there), only where the positions have reached those offsets, checked in the same
        step as the writes; else PositionsBehind, nothing applied.
        """
        ...

    async def advance(
        self,
        positions: Mapping[str, int],
        *,
        into: int | None = None,
        held: Mapping[str, int] | None = None,
    ) -> None: ...

    async def positions(self) -> dict[str, int]:
        """The live generation's positions: "topic/partition" -> last offset taken in."""
        ...

    async def known_vectors(self, memories: Sequence[Memory]) -> list[Vectors | None]: ...


class Generations(Protocol):
    """Generations of the projection: a rebuild writes a fresh one and swaps it in."""

    async def live(self) -> int: ...

    async def model(self, generation: int) -> str | None:
        """The embedding model `generation` was built with (None: it has no index yet). The
        projection owns it: events never decide which model embeds them."""
        ...

    async def allocate(self) -> int: ...

    async def swap_all(self, live: int, rebuilt: int) -> SwapResult: ...

    async def swap_tenant(
        self, live: int, rebuilt: int, tenant: TenantId, partition: str
    ) -> SwapResult:
        """Swap the tenant's rebuilt state in once the rebuild has caught up with the live
        generation at `partition` (a position field): the tenant's own partition, the only
        one its state depends on, so writes elsewhere never keep it waiting."""
        ...

    async def drop(self, generation: int) -> None: ...


# The most memories one recall or search returns (`k`, `offset + limit`).
MAX_RECALL_K = 1000


class MemoryReader(Protocol):
    def memories(self, tenant: TenantId, where: MemoryFilter | None = None) -> list[Memory]:
        """The tenant's memories in the live generation (those `where` matches), oldest first."""
        ...


class Recaller(Protocol):
    def recall(self, tenant: TenantId, text: str, k: int = 10) -> list[RecalledMemory]:
        """The tenant's memories most relevant to `text`, best first."""
        ...


class ItemIndex(Protocol):
    """What a key-value store (the LangGraph store) asks of its items beyond reading them:
    how near a query each is, and a refresh of their TTLs."""

    def similarities(
        self, tenant: TenantId, memory_ids: Sequence[str], text: str
    ) -> dict[str, float]:
        """The cosine similarity of `text` to each memory's nearest vector: its best facet's,
        or its content's when it has no facets. A memory with no text (nothing embedded) or
        not stored has no entry."""
        ...

    def refresh(self, tenant: TenantId, leases: Sequence[tuple[str, str, datetime]]) -> None:
        """Move the deadline of each (memory id, event id, deadline) to `deadline`, where the
        memory is still the one that event wrote and its deadline is earlier."""
        ...


class MemoryLookup(MemoryReader, Protocol):
    """Reads memories by id too (the HTTP API, the LangGraph store), and the tenant's
    documents (events.DocumentChange: summary views, their results, tasks)."""

    def memories_by_id(self, tenant: TenantId, ids: Sequence[str]) -> list[Memory | None]:
        """The tenant's memories with these ids in the live generation (None: not stored), in
        the order asked."""
        ...

    def documents(self, tenant: TenantId, collection: str) -> dict[str, str]:
        """The tenant's documents of `collection` in the live generation: key -> JSON."""
        ...


class TombstoneReader(Protocol):
    """Which ids are tombstoned, read without blocking the caller's event loop (the HTTP
    API's write path asks before every write). Used on one event loop; closed with it."""

    async def forgotten(
        self, asked: Mapping[str, Collection[str]]
    ) -> dict[str, set[str] | Exception]:
        """For each tenant of `asked`, which of its ids are tombstoned in the live generation,
        in one round trip per shard; a tenant whose shard could not be read gets that
        `InfrastructureError` instead, so the others' answers stand."""
        ...

    async def aclose(self) -> None:
        """Close the connections it opened."""
        ...


@dataclass(frozen=True, slots=True)
class TenantStats:
    tenant: TenantId
    memories: int
    oldest: datetime
    newest: datetime


class Identified(Protocol):
    """An event as the projection's applied markers know it: its tenant and its id."""

    @property
    def tenant(self) -> str: ...

    @property
    def id(self) -> str: ...


@dataclass(frozen=True, slots=True)
class EventRef:
    """An event by its tenant and id alone: what the applied markers are asked about when the
    event itself is not at hand (an extraction not written yet)."""

    tenant: str
    id: str


Marked = TypeVar("Marked", bound=Identified)


class ProjectionProgress(Protocol):
    """What the live projection has applied so far, read synchronously."""

    def live_generation(self) -> int:
        """The generation recall reads now."""
        ...

    def unapplied(self, events: Sequence[Marked]) -> list[Marked]:
        """The events of `events` (or of their tenants and ids) the live projection has not
        applied yet, in order."""
        ...

    def wait_applied(
        self,
        events: Sequence[Marked],
        timeout_s: float,
        tick: Callable[[int, int], None] | None = None,
    ) -> list[Marked]:
        """Wait until `events` are applied or `timeout_s` passed; the tenants' last events
        still unapplied ([] when all are)."""
        ...

    def memory_count(self, tenant: TenantId) -> int: ...

    def positions(self) -> dict[str, int]:
        """The live generation's positions: "topic/partition" -> last offset applied."""
        ...

    def tenant_stats(self, tenant: TenantId | None = None) -> list[TenantStats]:
        """Memories per tenant with their oldest and newest timestamps, by tenant id."""
        ...


@dataclass(frozen=True, slots=True)
class ShardLayout:
    """The shards' Redis URLs in shard order, and the layout's version (a layout that moves
    partitions between shards is a new version)."""

    urls: tuple[str, ...]
    version: int = 1

    def __post_init__(self) -> None:
        if not self.urls:
            raise ValueError("a shard layout needs at least one Redis URL")

    @property
    def count(self) -> int:
        return len(self.urls)

    def of_partition(self, partition: int) -> int:
        """The shard that holds `partition`'s tenants and position."""
        return partition % len(self.urls)

    def url_of(self, partition: int) -> str:
        """The Redis that holds `partition`'s tenants and position."""
        return self.urls[self.of_partition(partition)]

    def partitions_of(self, shard: int, partitions: int) -> list[int]:
        """The partitions (of `partitions`) shard `shard` holds."""
        return [p for p in range(partitions) if self.of_partition(p) == shard]


class ShardWriters(Protocol):
    """The live projection's shards as the worker writes them: the layout now (a newer one is
    followed without a restart) and each shard's writer and generations, by URL."""

    def current_layout(self) -> ShardLayout: ...

    def live_writer(self, url: str) -> tuple[ProjectionWriter, Generations]:
        """Shard `url`'s writer and the generations it reads, on a connection of its own for
        the process's life."""
        ...


@dataclass(frozen=True, slots=True)
class ShardReport:
    """One shard of the projection as `stats` and `status` show it: where it is (never with a
    password), whether it answered (`error` says why not), its live generation, how many
    memories that holds, the memory the server uses and its partitions' positions."""

    shard: int
    where: str
    reachable: bool
    error: str = ""
    generation: int = 0
    memories: int = 0
    used_bytes: int = 0
    positions: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Difference:
    """One way a tenant's memories differ between two generations."""

    tenant: str
    memory_id: str
    what: str

    def __str__(self) -> str:
        where = f"memory {self.memory_id}" if self.memory_id else "tombstones"
        return f"tenant {self.tenant!r}, {where}: {self.what}"


class GenerationComparer(Protocol):
    """Compares two generations memory by memory (`memstream verify`)."""

    async def tenants(self, generation: int) -> set[str]:
        """The tenants with memories or tombstones in `generation`."""
        ...

    async def compare(self, live: int, rebuilt: int, tenant: TenantId) -> list[Difference]: ...


class TokenLedger(Protocol):
    """Tokens spent by model calls memory makes outside turns, per UTC day, tenant and purpose
    (`extraction:<strategy>`, ...): the extraction budget reads it, `memstream stats` shows it.
    Kept a month."""

    def spend(self, day: date, tenant: TenantId, purpose: str, tokens: int) -> None: ...

    def spent(self, day: date, tenant: TenantId | None = None) -> dict[tuple[str, str], int]:
        """(tenant, purpose) -> tokens spent on `day`; one tenant's, or every tenant's."""
        ...


class ApiKeyStore(Protocol):
    """The server's API keys as stored: a key's digest -> its record (JSON), per namespace."""

    def put(self, digest: str, record: str) -> None: ...

    def get(self, digest: str) -> str | None: ...

    def delete(self, digest: str) -> bool:
        """Remove the record; False when there was none."""
        ...

    def records(self) -> dict[str, str]:
        """Every digest and its record."""
        ...

    def count(self) -> int: ...


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session's working memory as stored: its document (JSON) and its version (1 after
    the first put, one more after each)."""

    session_id: str
    document: str
    version: int


class WorkingMemoryStore(Protocol):
    """Sessions' working memory: mutable state per tenant and session, with a TTL, each put
    a compare-and-set on the session's version (raises StaleSessionError, naming the current
    version, when another put came first). Read and written on the caller's event loop (the
    server's every put and append go through it); used on one loop, closed with it."""

    async def get(self, tenant: TenantId, session_id: str) -> StoredSession | None: ...

    async def put(
        self,
        tenant: TenantId,
        session_id: str,
        document: str,
        *,
        expected_version: int,
        ttl_s: int | None,
        owner: str | None,
    ) -> int:
        """Store `document` if the session is at `expected_version` (0: absent); the new
        version. `ttl_s` None keeps it until deleted; `owner` is what `sessions` filters on."""
        ...

    async def delete(self, tenant: TenantId, session_id: str) -> bool:
        """Remove the session; False when there was none."""
        ...

    async def sessions(
        self, tenant: TenantId, *, owner: str | None, offset: int, limit: int
    ) -> tuple[int, list[str]]:
        """How many live sessions the tenant has (of `owner`, if given), and a page of their
        ids in order."""
        ...

    async def aclose(self) -> None:
        """Close the connections it opened."""
        ...


class SessionMove(Protocol):
    """Sessions' working memory of the tenants a reshard moves, from their old shard to the
    new one (working memory is not in the log: the warm-up cannot refill it)."""

    def copy(
        self, moved: Callable[[str], bool], *, copied: Mapping[str, int] | None = None
    ) -> dict[str, int]:
        """Copy each session of a `moved` tenant that the new shard has no newer version of
        (TTL kept); the versions copied, by session. A session still at the version that an
        earlier pass (`copied`) copied is left alone."""
        ...

    def drop(self, moved: Callable[[str], bool]) -> int:
        """Delete the `moved` tenants' working memory from the old shard; keys deleted."""
        ...


@dataclass(frozen=True, slots=True)
class ProcessReport:
    """One process's last heartbeat (`memstream status`)."""

    kind: str
    pid: int
    host: str
    seen_at: datetime
    metrics_port: int | None
    lag: int | None
    last_error: str
    last_error_at: datetime | None


# How far back each process's reported lags are kept (the console plots the last hour).
LAG_HISTORY = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class LagSeries:
    """The lags (events behind) one process reported, oldest first, within `LAG_HISTORY` of
    its latest report, whether or not it still runs."""

    kind: str
    host: str
    pid: int
    points: tuple[tuple[datetime, int], ...]


class ProcessRegistry(Protocol):
    """Where the processes of a namespace (workers, servers) say they are alive: a report
    lasts `ttl_s` unless written again. A report with a lag is also kept as a point of the
    process's lag series, for `LAG_HISTORY`."""

    def write(self, report: ProcessReport, ttl_s: int) -> None: ...

    def remove(self, host: str, pid: int) -> None: ...

    def reports(self) -> list[ProcessReport]:
        """Every process that reported within its TTL, by kind, host, then pid."""
        ...

    def lags(self) -> list[LagSeries]:
        """Every process's lag series, by kind, host, then pid."""
        ...


@dataclass(frozen=True, slots=True)
class ProjectionSession:
    """The parts a rebuild or a check uses together, over one connection that lives as long
    as the session (`memstream replay`, `verify`)."""

    writer: ProjectionWriter
    generations: Generations
    comparer: GenerationComparer


class Resharding(Protocol):
    """What moving the projection onto other shards (`operations.reshard`) needs of its
    backend: the stored layout, and each shard by URL, to fill, compare and empty."""

    @property
    def window_s(self) -> float:
        """How long after a layout is stored every process routes by it: the longest a moved
        tenant may still reach its old shard."""
        ...

    def stored(self) -> ShardLayout | None:
        """The layout stored; None when none ever was (the settings' holds)."""
        ...

    def publish(self, layout: ShardLayout, *, replaces: int) -> bool:
        """Store `layout` if the stored one is still version `replaces` (0: none); False if
        another reshard stored one meanwhile."""
        ...

    def session(self, url: str) -> AbstractAsyncContextManager[ProjectionSession]:
        """Shard `url`'s writer, generations and comparer (the warm-up fills it from the log)."""
        ...

    def positions(self, url: str) -> Mapping[str, int]:
        """Shard `url`'s live positions, by partition field (`topic/partition`)."""
        ...

    def session_move(self, source_url: str, target_url: str) -> SessionMove:
        """Carrying moved tenants' working memory from shard `source_url` to `target_url`."""
        ...

    def drop_moved(self, url: str, moved: Callable[[str], bool], fields: Collection[str]) -> int:
        """Delete from shard `url` the tenants that `moved` and the positions `fields` of their
        partitions; the number of tenants deleted."""
        ...
