"""The agent runtime's durable effects journal, in the projection's Redis.

Redis rather than Kafka because every effect does a keyed read and two keyed writes on the
run's hot path: Redis answers point lookups in well under a millisecond, while a Kafka journal
would need a compacted topic and a local table rebuilt on every start.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any

import redis

from memstream.agent.journal import EffectRecord, RunRecord, RunStatus
from memstream.agent.threads import ThreadSnapshot

__all__ = ["RedisJournal"]


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
