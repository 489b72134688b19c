"""The store seam: what a tenant's memory store offers the manager and the middleware.

A store is scoped to one tenant. It searches by meaning, lists memories by filter, and
applies memory events — the only way anything is written. A `TransactionalMemoryStore`
applies each event atomically under its id (the event's effect key) and, asked to apply an id
it already applied, returns the recorded outcome and writes nothing: a crashed run may safely
write again. Any other store may have written when a crash hides whether it did, so the
middleware refuses to replay its writes.

Two implementations pass one contract suite: the event-sourced store (writes go to Kafka,
reads come from the Redis projection; memstream.eventsourced) and the in-process store
(memstream.memory.inprocess).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from memstream.errors import InvalidInputError
from memstream.memory.events import MemoryEvent
from memstream.memory.model import Memory, MemoryType, RecalledMemory

__all__ = [
    "MemoryFilter",
    "MemoryStore",
    "TransactionalMemoryStore",
    "WriteOutcome",
    "check_tenant",
    "is_transactional",
]


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories: every set field must match (None: any)."""

    memory_types: frozenset[MemoryType] | None = None
    thread: str | None = None
    before: datetime | None = None

    def matches(self, memory: Memory) -> bool:
        return (
            (self.memory_types is None or memory.memory_type in self.memory_types)
            and (self.thread is None or memory.thread == self.thread)
            and (self.before is None or memory.timestamp < self.before)
        )


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What applying an event did: the ids it wrote. Deterministic, so it can be recorded.

    `ids` may be the function that works them out: a store on a turn's path returns its
    outcome before anyone asks for the ids (deriving them costs more than the rest of the
    write), and most callers never do."""

    event_id: str
    ids: tuple[str, ...] | Callable[[], tuple[str, ...]]

    @property
    def memory_ids(self) -> tuple[str, ...]:
        return self.ids if isinstance(self.ids, tuple) else self.ids()


@runtime_checkable
class MemoryStore(Protocol):
    @property
    def tenant(self) -> str: ...

    @property
    def embedding_model(self) -> str:
        """The model events written to this store are recorded for."""
        ...

    @property
    def transactional(self) -> bool: ...

    def search(self, query: str, *, k: int) -> list[RecalledMemory]:
        """The k memories most relevant to `query`, best first."""
        ...

    def memories(self, where: MemoryFilter | None = None) -> list[Memory]:
        """The tenant's memories matching `where`, oldest first."""
        ...

    def write(
        self, event: MemoryEvent, *, on_durable: Callable[[], None] | None = None
    ) -> WriteOutcome:
        """Apply (or send, to be applied) `event`. `on_durable` is called once the write can no
        longer be lost — at once for a store that applies in place, on the log's
        acknowledgement for the event-sourced one (possibly from another thread)."""
        ...


class TransactionalMemoryStore(MemoryStore, Protocol):
    @property
    def transactional(self) -> Literal[True]: ...


def is_transactional(store: MemoryStore) -> bool:
    return store.transactional is True


def check_tenant(event: MemoryEvent, tenant: str) -> None:
    """Refuse an event of another tenant: a store is scoped to exactly one."""
    if event.tenant != tenant:
        raise InvalidInputError(f"an event of tenant {event.tenant!r} reached {tenant!r}'s store")
