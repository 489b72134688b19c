"""The effects journal: what a run did to the world, so a crashed run can be replayed safely.

Every side effect of a run goes through `run_effect(journal, run, name, key, fn)`:

    no entry            record "started", run fn, record "applied" with its outcome
    entry "applied"     return the recorded outcome; fn does not run again
    entry "started"     fn may have run before a crash: run it again only when the target can
                        tell (`replay_safe`: an idempotency key, a transactional store);
                        otherwise refuse with EffectRefusedError

Two journals: `InMemoryJournal` for tests and single-process use, and `RedisJournal`, which
survives the process. Redis rather than Kafka because every effect does a keyed read and two
keyed writes on the run's hot path: Redis answers point lookups in well under a millisecond,
while a Kafka journal would need a compacted topic and a local table rebuilt on every start.
Outcomes are JSON values, so both journals store exactly the same thing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, Protocol, TypeVar

import redis

from memstream.agent.threads import ThreadSnapshot
from memstream.errors import EffectRefusedError

__all__ = [
    "EffectRecord",
    "EffectTicket",
    "InMemoryJournal",
    "Journal",
    "RedisJournal",
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


class RedisJournal:
    """One hash per run: `run` -> the RunRecord, `effect:{name}:{key}` -> the EffectRecord.

    Entries expire `ttl_s` after the run's last write: a run older than that is not recovered.
    """

    def __init__(self, client: redis.Redis, namespace: str, *, ttl_s: int = 7 * 24 * 3600) -> None:
        self._client = client
        self._namespace = namespace
        self._ttl_s = ttl_s

    def _key(self, run_id: str) -> str:
        return f"{self._namespace}:journal:{run_id}"

    def _write(self, run_id: str, field: str, value: Any) -> None:
        pipe = self._client.pipeline(transaction=True)
        pipe.hset(self._key(run_id), field, json.dumps(value))
        pipe.expire(self._key(run_id), self._ttl_s)
        pipe.execute()

    def _read(self, run_id: str, field: str) -> Any:
        raw = self._client.hget(self._key(run_id), field)
        return None if raw is None else json.loads(raw)

    def begin_run(self, record: RunRecord) -> None:
        self._write(record.run_id, "run", _record_json(record))

    def run(self, run_id: str) -> RunRecord | None:
        raw = self._read(run_id, "run")
        if raw is None:
            return None
        return RunRecord(**{**raw, "snapshot": ThreadSnapshot.from_json(raw["snapshot"])})

    def end_run(self, run_id: str, status: RunStatus) -> None:
        record = self.run(run_id)
        if record is not None:
            self._write(run_id, "run", _record_json(replace(record, status=status)))

    def effect(self, run_id: str, name: str, key: str) -> EffectRecord | None:
        raw = self._read(run_id, f"effect:{name}:{key}")
        return None if raw is None else EffectRecord(**raw)

    def effect_started(self, run_id: str, name: str, key: str) -> None:
        self._write(run_id, f"effect:{name}:{key}", asdict(EffectRecord("started")))

    def effect_applied(self, run_id: str, name: str, key: str, outcome: Any) -> None:
        self._write(run_id, f"effect:{name}:{key}", asdict(EffectRecord("applied", outcome)))


def _record_json(record: RunRecord) -> dict[str, Any]:
    return {
        "run_id": record.run_id,
        "thread_id": record.thread_id,
        "tenant_id": record.tenant_id,
        "input": record.input,
        "snapshot": record.snapshot.to_json(),
        "status": record.status,
    }
