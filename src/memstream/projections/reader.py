"""Reading a tenant's memories out of the projection whole (for consolidation and stores)."""

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
        found = [_memory(row) for row in rows if row[0] is not None]
        return sorted(found, key=lambda m: (m.timestamp, m.id))

    def memories_by_id(self, tenant: str, ids: Sequence[str]) -> list[Memory | None]:
        """The memories of `tenant` with these ids in the live generation (None: not stored),
        in the order asked, in one round trip."""
        keys = self._status.live()
        with redis_errors(self._url, "reading memories"):
            pipe = self._client.pipeline(transaction=False)
            for memory_id in ids:
                pipe.hmget(keys.memory(tenant, memory_id), _FIELDS)
            rows = pipe.execute()
        return [_memory(row) if row[0] is not None else None for row in rows]


def _memory(row: Sequence[bytes | None]) -> Memory:
    pairs = zip(_FIELDS, row, strict=True)
    return from_hash({name: value.decode() for name, value in pairs if value is not None})
