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

import enum
import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

from memstream.memory.bounds import Bounds, eviction_key
from memstream.memory.events import (
    REGISTRY,
    Applies,
    DocumentChange,
    Selection,
    memories_of,
)
from memstream.memory.model import Memory, derived_from
from memstream.memory.ports import Position
from memstream.memory.provenance import Logged, provenance_of

__all__ = [
    "CHECKPOINT_EVERY",
    "Change",
    "Diffed",
    "Fold",
    "Prepared",
    "TenantLog",
    "Touch",
    "prepare",
]

# The fold is kept every this many events, so the memory at any point is a copy and at most
# this many applies away, not a fold from the start.
CHECKPOINT_EVERY = 1000


class Change(enum.StrEnum):
    """What an event did to one memory."""

    RECORDED = "recorded"  # written for the first time (a summary too: `related` = replaced)
    EDITED = "edited"  # written again under its id (a MemorySaved or a put of its slot)
    CONSOLIDATED = "consolidated"  # replaced by a summary (`related` = the summary's id)
    REPLACED = "replaced"  # a reextraction's facts took its place (`related` = their ids)
    FORGOTTEN = "forgotten"  # removed and tombstoned by a MemoryForgotten
    EVICTED = "evicted"  # removed by the tenant's bound, after the event at `position`
    EXPIRED = "expired"  # a store item whose TTL ran out
    ERASED = "erased"  # removed with the whole tenant (TenantErased)


# Changes after which the memory is no longer in the tenant's memory.
_REMOVING = frozenset(
    {
        Change.CONSOLIDATED,
        Change.REPLACED,
        Change.FORGOTTEN,
        Change.EVICTED,
        Change.EXPIRED,
        Change.ERASED,
    }
)


class Touch(NamedTuple):
    """One change to one memory, by the event at `position` (for an eviction: the event whose
    apply pushed the tenant over its bound). A named tuple, not a frozen dataclass: a fold of a
    long log makes one per memory an event touches, and a tuple is made in a fifth of the time."""

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


def prepare(logged: Logged) -> Prepared:
    return logged.event_id, memories_of(logged.event, logged.event_id)


class Fold:
    """The tenant's memory after the events applied so far, and the touches they made."""

    def __init__(self, bounds: Bounds) -> None:
        self.memories: dict[str, Memory] = {}
        # The tenant's documents (DocumentChange.field -> JSON body): views, results, tasks.
        self.documents: dict[str, str] = {}
        self._bounds = bounds
        self._tombstones: set[str] = set()
        self._applied: set[str] = set()
        # The eviction order, lazily: an entry whose memory is gone or was rewritten is stale.
        self._order: list[tuple[tuple[int, int, str], str]] = []
        # Each memory's key in that order as last written, so staleness is a lookup.
        self._keys: dict[str, tuple[int, int, str]] = {}

    def copy(self) -> Fold:
        """A fold in this one's state that applies on without changing this one."""
        copied = Fold(self._bounds)
        copied.memories = dict(self.memories)
        copied.documents = dict(self.documents)
        copied._tombstones = set(self._tombstones)
        copied._applied = set(self._applied)
        copied._order = list(self._order)
        copied._keys = dict(self._keys)
        return copied

    @property
    def tombstones(self) -> frozenset[str]:
        """The ids no event may write again (a put clears its slot's)."""
        return frozenset(self._tombstones)

    def apply(
        self, logged: Logged, prepared: Prepared | None = None, *, bounds: Bounds | None = None
    ) -> list[Touch]:
        """Apply one event (nothing if its id was applied before); the touches it made.
        `prepared`: its id and memories, worked out once (`prepare`) for many folds; `bounds`:
        the bound this apply evicts to, where the writer's differs from the fold's."""
        event = logged.event
        event_id, written = prepared or prepare(logged)
        if event_id in self._applied:
            return []
        self._applied.add(event_id)
        row = REGISTRY.of(event)
        made: list[tuple[str, Change, tuple[str, ...]]] = []
        applies = row.applies
        if applies is Applies.RECORD:
            made += self._write(written)
        elif applies is Applies.PUT:  # a put writes its slot again, even a forgotten one
            self._tombstones.difference_update(m.id for m in written)
            made += self._write(written)
        elif applies is Applies.CONSOLIDATE:
            replaced = row.replaced(event)
            if all(i in self.memories for i in replaced):
                summary = tuple(m.id for m in written)
                for gone in replaced:
                    del self.memories[gone]
                    made.append((gone, Change.CONSOLIDATED, summary))
                made += [(i, c, replaced) for i, c, _ in self._write(written)]
        elif applies is Applies.REPLACE:
            replaced = tuple(i for i in row.replaced(event) if i in self.memories)
            for gone in replaced:
                del self.memories[gone]
                made.append((gone, Change.REPLACED, tuple(m.id for m in written)))
            made += [(i, c, replaced) for i, c, _ in self._write(written)]
        elif applies is Applies.FORGET:
            for memory_id in self._forgotten_by(row.selection(event)):
                self._tombstones.add(memory_id)
                if self.memories.pop(memory_id, None) is not None:
                    made.append((memory_id, Change.FORGOTTEN, ()))
        elif applies is Applies.EXPIRE:
            lapse = row.lapse(event)
            held = self.memories.get(lapse.memory_id)
            if held is not None and lapse.ends(held):
                del self.memories[held.id]
                made.append((held.id, Change.EXPIRED, ()))
        elif applies is Applies.DOCUMENT:
            changes = row.changes(event)
            if self.admits(changes):
                for change in changes:
                    self._change_document(change)
        elif applies is Applies.ERASE:
            made += [(i, Change.ERASED, ()) for i in self.memories]
            self.memories.clear()
            self.documents.clear()
            self._tombstones.clear()
            self._order.clear()
            self._keys.clear()
        made += [(i, Change.EVICTED, ()) for i in self._evict(bounds or self._bounds)]
        return [
            Touch(i, c, event_id, row.name, row.version, logged.position, logged.written_at, r)
            for i, c, r in made
        ]

    def admits(self, changes: Iterable[DocumentChange]) -> bool:
        """Whether every expectation of `changes` holds (DocumentChange.expect)."""
        return all(c.expect is None or self.documents.get(c.field, "") == c.expect for c in changes)

    def _change_document(self, change: DocumentChange) -> None:
        if change.body is not None:
            self.documents[change.field] = change.body
        elif change.key:
            self.documents.pop(change.field, None)
        else:  # the whole collection
            for name in [f for f in self.documents if f.startswith(change.field)]:
                del self.documents[name]

    def _write(self, written: Iterable[Memory]) -> list[tuple[str, Change, tuple[str, ...]]]:
        made: list[tuple[str, Change, tuple[str, ...]]] = []
        for memory in written:
            if memory.id in self._tombstones:
                continue
            if any(source in self._tombstones for source in derived_from(memory)):
                continue  # derived from a forgotten memory (extracted before it was forgotten)
            change = Change.EDITED if memory.id in self.memories else Change.RECORDED
            self.memories[memory.id] = memory
            key = self._keys[memory.id] = eviction_key(memory)
            heapq.heappush(self._order, (key, memory.id))
            made.append((memory.id, change, ()))
        return made

    def _forgotten_by(self, chosen: Selection) -> list[str]:
        if chosen.ids:  # tombstoned even if not (or not yet) stored; and what came of them
            named = set(chosen.ids)
            derived = [i for i, m in self.memories.items() if i not in named and chosen.chooses(m)]
            return [*chosen.ids, *derived]
        return [i for i, m in self.memories.items() if chosen.chooses(m)]

    def _evict(self, bounds: Bounds) -> list[str]:
        bound = bounds.max_memories
        evicted: list[str] = []
        while bound and len(self.memories) > bound:
            key, memory_id = heapq.heappop(self._order)
            if memory_id in self.memories and self._keys[memory_id] == key:
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


class TenantLog:
    """One tenant's events in log order (one partition: offsets order them), and what the
    whole log says became of each memory. Folded once: `extended` folds on from its end."""

    def __init__(self, events: Sequence[Logged], bounds: Bounds) -> None:
        self.bounds = bounds
        self.events: list[Logged] = []
        self.touches: dict[str, list[Touch]] = {}
        self.gone: frozenset[str] = frozenset()  # forgotten or erased by now: out of every view
        self._prepared: list[Prepared] = []
        self._times: list[datetime] = []
        self._first: dict[str, int] = {}  # each event id's first place: the one applied
        self._fold = Fold(bounds)
        self._checkpoints: list[Fold] = []  # the fold before events 0, N, 2N, ...
        self._take(events)

    def extended(self, more: Sequence[Logged]) -> TenantLog:
        """This log with `more` events after its end, folded on from where this one ended;
        this one is left as it is."""
        log = TenantLog((), self.bounds)
        log.events, log._prepared, log._times = [*self.events], [*self._prepared], [*self._times]
        log.touches = {memory_id: [*touches] for memory_id, touches in self.touches.items()}
        log._first, log._checkpoints = dict(self._first), [*self._checkpoints]
        log._fold = self._fold.copy()
        log._take(more)
        return log

    def _take(self, events: Sequence[Logged]) -> None:
        for logged in events:
            index = len(self.events)
            if index % CHECKPOINT_EVERY == 0:
                self._checkpoints.append(self._fold.copy())
            prepared = prepare(logged)
            self.events.append(logged)
            self._prepared.append(prepared)
            self._times.append(logged.written_at)
            self._first.setdefault(prepared[0], index)
            for touch in self._fold.apply(logged, prepared):
                self.touches.setdefault(touch.memory_id, []).append(touch)
        self.gone = frozenset(self._gone())

    def _folded(self, fold: Fold, start: int, end: int) -> Iterator[Touch]:
        """Apply events `start` to `end` to `fold`; the touches they made."""
        for logged, prepared in zip(self.events[start:end], self._prepared[start:end], strict=True):
            yield from fold.apply(logged, prepared)

    def _fold_to(self, count: int) -> Fold:
        """A fold of the first `count` events: the checkpoint below, folded on."""
        kept = min(count // CHECKPOINT_EVERY, len(self._checkpoints) - 1)
        if kept < 0:
            return Fold(self.bounds)
        fold = self._checkpoints[kept].copy()
        for _ in self._folded(fold, kept * CHECKPOINT_EVERY, count):
            pass
        return fold

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
    def end(self) -> int:
        """The log offset after the last event read (0: none)."""
        return self.events[-1].position.offset + 1 if self.events else 0

    def cutoff(self, at: datetime) -> int:
        """How many of the events a log truncated at `at` keeps: those before the first one
        written after `at`."""
        for index, written_at in enumerate(self._times):
            if written_at > at:
                return index
        return len(self._times)

    def history(self, memory_id: str) -> list[Touch]:
        """Every touch of `memory_id`, in log order ([]: the tenant never had it, as far as
        its readable log says)."""
        return list(self.touches.get(memory_id, ()))

    def state(self, count: int) -> dict[str, Memory]:
        """The memory a rebuild from the first `count` events would hold, exactly (less the
        provenance, which `view` gives)."""
        return self._fold_to(count).memories

    def view(self, count: int) -> list[Memory]:
        """The memory after the first `count` events, less what the log forgot or erased since
        (forgetting is retroactive), each with its provenance: in (timestamp, id) order."""
        kept = [self._traced(m) for i, m in self.state(count).items() if i not in self.gone]
        return sorted(kept, key=lambda m: (m.timestamp, m.id))

    def _traced(self, memory: Memory) -> Memory:
        """`memory` with the provenance the projection stamps: its event where it was applied."""
        at = self.events[self._first[memory.event_id]]
        where = at.position
        return replace(
            memory, provenance=provenance_of(at.event, where.topic, where.partition, where.offset)
        )

    def diff(self, start: int, end: int) -> list[Diffed]:
        """The memories that differ between the first `start` and the first `end` events."""
        if end < start:
            start, end = end, start
        fold = self._fold_to(start)
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
            shown = self._traced(now) if now is not None and memory_id not in self.gone else None
            found.append(Diffed(memory_id, change, touch, shown))
        return sorted(found, key=lambda d: (d.last.position.offset, d.memory_id))
