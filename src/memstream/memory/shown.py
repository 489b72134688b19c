"""What a turn was shown, traced back to the events that wrote it (`memstream explain`): each
memory of its prompt with the provenance of the write it saw, as the log stood at that turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from memstream.memory.events import TurnCompleted, memory_ids_of
from memstream.memory.provenance import Logged, Provenance, provenance_of

__all__ = ["ShownMemory", "ShownTurn", "turns_shown"]


@dataclass(frozen=True, slots=True)
class ShownMemory:
    """A memory a turn was shown: the `provenance` of the write it saw (None: no readable
    event of the log wrote it), and for a summary the provenance of what it `replaced` (for
    an extracted fact, of what it was derived from), as they were when it was written."""

    memory_id: str
    provenance: Provenance | None
    sources: tuple[Provenance, ...] = ()


@dataclass(frozen=True, slots=True)
class ShownTurn:
    """One recorded turn (`provenance` of its TurnCompleted) and what its prompt showed."""

    provenance: Provenance
    shown: tuple[ShownMemory, ...]


def turns_shown(logged: Iterable[Logged], run: str, turn: int | None = None) -> list[ShownTurn]:
    """The turns of `run` (only turn `turn`, if given) in `logged` — a tenant's events in log
    order, each where the log holds it — each with what it was shown, traced to the events
    that wrote it as the log stood at that turn."""
    writers: dict[str, Logged] = {}
    found: list[ShownTurn] = []
    for entry in logged:
        event = entry.event
        if isinstance(event, TurnCompleted) and event.run == run and turn in (None, event.turn):
            shown = tuple(_traced(memory_id, writers) for memory_id in event.shown)
            found.append(ShownTurn(_provenance(entry), shown))
        # The writes themselves, not their provenance: only the shown ones' is worked out.
        for memory_id in memory_ids_of(event):
            writers[memory_id] = entry
    return found


def _provenance(entry: Logged) -> Provenance:
    at = entry.position
    provenance = provenance_of(entry.event, at.topic, at.partition, at.offset)
    assert provenance is not None  # only events that write memories are asked about
    return provenance


def _traced(memory_id: str, writers: Mapping[str, Logged]) -> ShownMemory:
    writer = writers.get(memory_id)
    if writer is None:
        return ShownMemory(memory_id, None)
    provenance = _provenance(writer)
    made_of = (*provenance.replaced, *provenance.derived)
    sources = tuple(_provenance(writers[r]) for r in made_of if r in writers)
    return ShownMemory(memory_id, provenance, sources)
