"""Reading a tenant's memories out of the projection: whole (for consolidation and stores), one
by id, and which ids are tombstoned (for the HTTP API)."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from memstream.memory.model import Memory
from memstream.projections.connection import redis_errors
from memstream.projections.schema import Fields, Keyspace, from_hash
from memstream.projections.status import ProjectionStatus

__all__ = ["ProjectionReader"]

_FIELDS = list(Fields.RETURNED)


class ProjectionReader:
    def __init__(self, client: redis.Redis, keyspace: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._status = ProjectionStatus(client, keyspace, url=url)
        self._url = url

    def memories(self, tenant: str) -> list[Memory]:
        """Every memory of `tenant` in the live generation, oldest first."""
        keys = self._status.live()
        with redis_errors(self._url, "reading memories"):
            members = self._client.zrange(keys.order(tenant), 0, -1)
            pipe = self._client.pipeline(transaction=False)
            for member in members:
                memory_id = bytes(member).decode().rsplit(":", 1)[1]  # type: ignore[arg-type]
                pipe.hmget(keys.memory(tenant, memory_id), _FIELDS)
            rows = pipe.execute()
        found = [
            from_hash(
                {
                    name: value.decode()
                    for name, value in zip(_FIELDS, row, strict=True)
                    if value is not None
                }
            )
            for row in rows
            if row[0] is not None
        ]
        return sorted(found, key=lambda m: (m.timestamp, m.id))

    def memory(self, tenant: str, memory_id: str) -> Memory | None:
        """One memory of `tenant` in the live generation, or None."""
        keys = self._status.live()
        with redis_errors(self._url, "reading a memory"):
            row: list[bytes | None] = self._client.hmget(  # type: ignore[assignment]
                keys.memory(tenant, memory_id), _FIELDS
            )
        if row[0] is None:
            return None
        return from_hash(
            {
                name: value.decode()
                for name, value in zip(_FIELDS, row, strict=True)
                if value is not None
            }
        )

    def forgotten(self, tenant: str, memory_ids: Sequence[str]) -> set[str]:
        """Which of `memory_ids` are tombstoned in the live generation (never written again)."""
        if not memory_ids:
            return set()
        keys = self._status.live()
        with redis_errors(self._url, "reading tombstones"):
            flags = self._client.smismember(keys.forgotten(tenant), list(memory_ids))
        return {memory_id for memory_id, flag in zip(memory_ids, flags, strict=True) if flag}
