"""The effects journal: what a run did to the world, so a crashed run can be replayed safely.

Every side effect of a run goes through `run_effect(journal, run, name, key, fn)`:

    no entry            record "started", run fn, record "applied" with its outcome
    entry "applied"     return the recorded outcome; fn does not run again
    entry "started"     fn may have run before a crash: run it again only when the target can
                        tell (`replay_safe`: an idempotency key, a transactional store);
                        otherwise refuse with EffectRefusedError

`InMemoryJournal` is for tests and single-process use; the journal that survives the process is
the projection's (`memstream.projections.journal.RedisJournal`, from
`Deployment.projection.journal()`). Outcomes are JSON values, so every journal stores exactly
the same thing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, TypeVar

from memstream.agent.threads import ThreadSnapshot
from memstream.errors import EffectRefusedError

__all__ = [
    "EffectRecord",
    "EffectTicket",
    "InMemoryJournal",
    "Journal",
    "RunRecord",
    "begin_effect",
    "run_effect",
]

T = TypeVar("T")

RunStatus = Literal["running", "suspended", "completed", "blocked", "failed"]


@dataclass(frozen=True, slots=True)
class EffectRecord:
    status: Literal["started", "applied"]
    outcome: Any = None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What recover needs to run a turn again: its input, config and the thread before it."""

    run_id: str
    thread_id: str
    tenant_id: str | None
    input: str
    snapshot: ThreadSnapshot
    status: RunStatus = "running"


class Journal(Protocol):
    def begin_run(self, record: RunRecord) -> None: ...

    def run(self, run_id: str) -> RunRecord | None: ...

    def end_run(self, run_id: str, status: RunStatus) -> None: ...

    def effect(self, run_id: str, name: str, key: str) -> EffectRecord | None: ...

    def effect_started(self, run_id: str, name: str, key: str) -> None: ...

    def effect_applied(self, run_id: str, name: str, key: str, outcome: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class EffectTicket:
    """A started effect whose outcome comes later, maybe from another thread (a write that
    becomes durable when the log acknowledges it): call `applied` once it has."""

    journal: Journal
    run_id: str
    name: str
    key: str

    def applied(self, outcome: Any) -> None:
        self.journal.effect_applied(self.run_id, self.name, self.key, outcome)


def begin_effect(
    journal: Journal, run_id: str, name: str, key: str, *, replay_safe: bool = False
) -> EffectRecord | EffectTicket:
    """Start the effect (name, key) of `run_id`: the applied record if it already applied
    (do not run it), else a ticket to complete. Refuses as `run_effect` does."""
    recorded = journal.effect(run_id, name, key)
    if recorded is not None and recorded.status == "applied":
        return recorded
    if recorded is not None and not replay_safe:
        raise EffectRefusedError(run_id, name, key)
    journal.effect_started(run_id, name, key)
    return EffectTicket(journal, run_id, name, key)


def run_effect(
    journal: Journal,
    run_id: str,
    name: str,
    key: str,
    fn: Callable[[], T],
    *,
    replay_safe: bool = False,
    encode: Callable[[T], Any] = lambda value: value,
    decode: Callable[[Any], T] = lambda value: value,
) -> T:
    """Run `fn` as the effect (name, key) of `run_id`, at most once unless `replay_safe`."""
    begun = begin_effect(journal, run_id, name, key, replay_safe=replay_safe)
    if isinstance(begun, EffectRecord):
        return decode(begun.outcome)
    outcome = fn()
    begun.applied(encode(outcome))
    return outcome


class InMemoryJournal:
    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._effects: dict[tuple[str, str, str], EffectRecord] = {}

    def begin_run(self, record: RunRecord) -> None:
        self._runs[record.run_id] = record

    def run(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    def end_run(self, run_id: str, status: RunStatus) -> None:
        self._runs[run_id] = replace(self._runs[run_id], status=status)

    def effect(self, run_id: str, name: str, key: str) -> EffectRecord | None:
        return self._effects.get((run_id, name, key))

    def effect_started(self, run_id: str, name: str, key: str) -> None:
        self._effects[(run_id, name, key)] = EffectRecord("started")

    def effect_applied(self, run_id: str, name: str, key: str, outcome: Any) -> None:
        # Stored as JSON and read back, so in-memory outcomes behave like durable ones.
        self._effects[(run_id, name, key)] = EffectRecord(
            "applied", json.loads(json.dumps(outcome))
        )
