"""History: a tenant's events, in log order, folded into what happened to each memory and
into its memory as it stood at any point of the log.

`Fold` applies events exactly as the projection does (apply_once.lua): each event id once; a
tombstoned id is never written again; a put replaces its slot and clears the slot's tombstone;
a consolidation applies only if every member is there; an expiry only if the slot still holds
the put that lapsed; an erasure removes the tenant and its tombstones; then the bound evicts in
`bounds.eviction_key` order. It notes each memory every event touches (`Touch`). Evictions are
not events: they follow deterministically from the events and the bound, so the fold derives
them, as a replay does (docs/lineage.md says why nothing more is recorded).

`TenantLog` is one tenant's events with those answers: a memory's history, its memory at a
point (`view`: retroactive forgetting applied) and what changed between two points (`diff`).
It reads nothing: the caller (streams.lineage) reads the tenant's partition.
"""

from __future__ import annotations

import bisect
import enum
import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstream.memory.bounds import Bounds, eviction_key
from memstream.memory.events import (
    REGISTRY,
    Applies,
    ItemExpired,
    ItemStored,
    MemoriesConsolidated,
    MemoryEvent,
    MemoryForgotten,
    memories_of,
)
from memstream.memory.model import Memory
from memstream.memory.ports import Position
from memstream.memory.store import MemoryFilter

__all__ = ["Change", "Diffed", "Fold", "Logged", "Prepared", "TenantLog", "Touch", "prepare"]


class Change(enum.StrEnum):
    """What an event did to one memory."""

    RECORDED = "recorded"  # written for the first time (a summary too: `related` = replaced)
    EDITED = "edited"  # written again under its id (a MemorySaved or a put of its slot)
    CONSOLIDATED = "consolidated"  # replaced by a summary (`related` = the summary's id)
    FORGOTTEN = "forgotten"  # removed and tombstoned by a MemoryForgotten
    EVICTED = "evicted"  # removed by the tenant's bound, after the event at `position`
    EXPIRED = "expired"  # a store item whose TTL ran out
    ERASED = "erased"  # removed with the whole tenant (TenantErased)


# Changes after which the memory is no longer in the tenant's memory.
_REMOVING = frozenset(
    {Change.CONSOLIDATED, Change.FORGOTTEN, Change.EVICTED, Change.EXPIRED, Change.ERASED}
)


@dataclass(frozen=True, slots=True)
class Logged:
    """One of the tenant's events where the log holds it, and when it was written there."""

    event: MemoryEvent
    position: Position
    written_at: datetime


@dataclass(frozen=True, slots=True)
class Touch:
    """One change to one memory, by the event at `position` (for an eviction: the event whose
    apply pushed the tenant over its bound)."""

    memory_id: str
    change: Change
    event_id: str
    event_type: str
    event_version: int
    position: Position
    written_at: datetime
    related: tuple[str, ...] = ()

    @property
    def removes(self) -> bool:
        return self.change in _REMOVING

    def as_json(self) -> dict[str, Any]:
        """The change as the CLI's --json, the HTTP API and MCP show it."""
        return {
            "memory_id": self.memory_id,
            "change": self.change.value,
            "at": self.written_at.isoformat(),
            "event_id": self.event_id,
            "event_type": self.event_type,
            "event_version": self.event_version,
            "topic": self.position.topic,
            "partition": self.position.partition,
            "offset": self.position.offset,
            "related": list(self.related),
        }


# An event's id and the memories it writes: pure, and costly enough (ids are digests) to work
# out once per event, not once per fold.
Prepared = tuple[str, tuple[Memory, ...]]


def prepare(event: MemoryEvent) -> Prepared:
    return event.id, memories_of(event)


class Fold:
    """The tenant's memory after the events applied so far, and the touches they made."""

    def __init__(self, bounds: Bounds) -> None:
        self.memories: dict[str, Memory] = {}
        self._bounds = bounds
        self._tombstones: set[str] = set()
        self._applied: set[str] = set()
        # The eviction order, lazily: an entry whose memory is gone or was rewritten is stale.
        self._order: list[tuple[tuple[int, int, str], str]] = []

    def apply(self, logged: Logged, prepared: Prepared | None = None) -> list[Touch]:
        """Apply one event (nothing if its id was applied before); the touches it made.
        `prepared`: its id and memories, worked out once (`prepare`) for many folds."""
        event = logged.event
        event_id, written = prepared or prepare(event)
        if event_id in self._applied:
            return []
        self._applied.add(event_id)
        row = REGISTRY.of(event)
        made: list[tuple[str, Change, tuple[str, ...]]] = []
        applies = row.applies
        if applies is Applies.RECORD:
            made += self._write(written)
        elif applies is Applies.PUT:
            assert isinstance(event, ItemStored)
            self._tombstones.discard(event.memory_id)
            made += self._write(written)
        elif applies is Applies.CONSOLIDATE:
            assert isinstance(event, MemoriesConsolidated)
            if all(i in self.memories for i in event.memory_ids):
                summary = tuple(m.id for m in written)
                for replaced in event.memory_ids:
                    del self.memories[replaced]
                    made.append((replaced, Change.CONSOLIDATED, summary))
                made += [(i, c, event.memory_ids) for i, c, _ in self._write(written)]
        elif applies is Applies.FORGET:
            assert isinstance(event, MemoryForgotten)
            for memory_id in self._forgotten_by(event):
                self._tombstones.add(memory_id)
                if self.memories.pop(memory_id, None) is not None:
                    made.append((memory_id, Change.FORGOTTEN, ()))
        elif applies is Applies.EXPIRE:
            assert isinstance(event, ItemExpired)
            held = self.memories.get(event.memory_id)
            deadline = held.expires_at if held is not None else None
            if (
                held is not None
                and held.event_id == event.put_event_id
                and deadline is not None
                and deadline <= event.deadline
            ):
                del self.memories[held.id]
                made.append((held.id, Change.EXPIRED, ()))
        elif applies is Applies.ERASE:
            made += [(i, Change.ERASED, ()) for i in self.memories]
            self.memories.clear()
            self._tombstones.clear()
            self._order.clear()
        made += [(i, Change.EVICTED, ()) for i in self._evict()]
        return [
            Touch(i, c, event_id, row.name, row.version, logged.position, logged.written_at, r)
            for i, c, r in made
        ]

    def _write(self, written: Iterable[Memory]) -> list[tuple[str, Change, tuple[str, ...]]]:
        made: list[tuple[str, Change, tuple[str, ...]]] = []
        for memory in written:
            if memory.id in self._tombstones:
                continue
            change = Change.EDITED if memory.id in self.memories else Change.RECORDED
            self.memories[memory.id] = memory
            heapq.heappush(self._order, (eviction_key(memory), memory.id))
            made.append((memory.id, change, ()))
        return made

    def _forgotten_by(self, event: MemoryForgotten) -> list[str]:
        if event.memory_ids:
            return list(event.memory_ids)  # tombstoned even if not (or not yet) stored
        if event.everything:
            return list(self.memories)
        where = MemoryFilter(thread=event.thread, before=event.before)
        return [i for i, m in self.memories.items() if where.matches(m)]

    def _evict(self) -> list[str]:
        bound = self._bounds.max_memories
        evicted: list[str] = []
        while bound and len(self.memories) > bound:
            key, memory_id = heapq.heappop(self._order)
            held = self.memories.get(memory_id)
            if held is not None and eviction_key(held) == key:
                del self.memories[memory_id]
                evicted.append(memory_id)
        return evicted


@dataclass(frozen=True, slots=True)
class Diffed:
    """One memory that differs between two points: how, and by which touch last."""

    memory_id: str
    change: str  # added | changed | consolidated | evicted | forgotten | expired | erased
    last: Touch
    memory: Memory | None  # as it stands at the later point (None: gone, or forgotten since)


@dataclass
class TenantLog:
    """One tenant's events in log order (one partition: offsets order them), and what the
    whole log says became of each memory."""

    events: Sequence[Logged]
    bounds: Bounds
    touches: dict[str, list[Touch]] = field(init=False)
    gone: frozenset[str] = field(init=False)  # forgotten or erased by now: out of every view

    def __post_init__(self) -> None:
        self._prepared = [prepare(logged.event) for logged in self.events]
        fold = Fold(self.bounds)
        self.touches = {}
        for touch in self._folded(fold, 0, len(self.events)):
            self.touches.setdefault(touch.memory_id, []).append(touch)
        self.gone = frozenset(self._gone())
        self._times = [logged.written_at for logged in self.events]

    def _folded(self, fold: Fold, start: int, end: int) -> Iterator[Touch]:
        """Apply events `start` to `end` to `fold`; the touches they made."""
        for logged, prepared in zip(self.events[start:end], self._prepared[start:end], strict=True):
            yield from fold.apply(logged, prepared)

    def _gone(self) -> set[str]:
        gone = {
            memory_id
            for memory_id, touches in self.touches.items()
            if any(t.change in (Change.FORGOTTEN, Change.ERASED) for t in touches)
        }
        # A summary forgotten takes what it replaced with it: they are what it spoke for.
        # Summaries of summaries: repeat until nothing more is added.
        while True:
            more = {
                member
                for memory_id in gone
                for t in self.touches.get(memory_id, ())
                if t.change is Change.RECORDED
                for member in t.related
            } - gone
            if not more:
                return gone
            gone |= more

    @property
    def offsets(self) -> list[int]:
        return [logged.position.offset for logged in self.events]

    def cutoff(self, at: datetime) -> int:
        """How many of the events a log truncated at `at` keeps: those before the first one
        written after `at`."""
        for index, written_at in enumerate(self._times):
            if written_at > at:
                return index
        return len(self._times)

    def cutoff_at_offset(self, offset: int) -> int:
        """How many of the events lie below log offset `offset`."""
        return bisect.bisect_left(self.offsets, offset)

    def history(self, memory_id: str) -> list[Touch]:
        """Every touch of `memory_id`, in log order ([]: the tenant never had it, as far as
        its readable log says)."""
        return list(self.touches.get(memory_id, ()))

    def state(self, count: int) -> dict[str, Memory]:
        """The memory a rebuild from the first `count` events would hold, exactly."""
        fold = Fold(self.bounds)
        for _ in self._folded(fold, 0, count):
            pass
        return fold.memories

    def view(self, count: int) -> list[Memory]:
        """The memory after the first `count` events, less what the log forgot or erased since
        (forgetting is retroactive): in (timestamp, id) order."""
        kept = [m for i, m in self.state(count).items() if i not in self.gone]
        return sorted(kept, key=lambda m: (m.timestamp, m.id))

    def diff(self, start: int, end: int) -> list[Diffed]:
        """The memories that differ between the first `start` and the first `end` events."""
        if end < start:
            start, end = end, start
        fold = Fold(self.bounds)
        for _ in self._folded(fold, 0, start):
            pass
        before = dict(fold.memories)
        last = {touch.memory_id: touch for touch in self._folded(fold, start, end)}
        after = fold.memories
        found = []
        for memory_id, touch in last.items():
            now = after.get(memory_id)
            if now is not None and memory_id not in before:
                change = "added"
            elif now is not None and now != before[memory_id]:
                change = "changed"
            elif now is None and memory_id in before:
                change = touch.change.value
            else:
                continue  # came and went within the span, or written again the same
            shown = now if memory_id not in self.gone else None
            found.append(Diffed(memory_id, change, touch, shown))
        return sorted(found, key=lambda d: (d.last.position.offset, d.memory_id))
