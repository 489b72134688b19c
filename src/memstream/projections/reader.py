"""Reading a tenant's memories out of the projection: whole (for consolidation and stores), and
one by id (the HTTP API's tombstone check is projections/tombstones.py, on its event loop)."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from memstream.memory.events import DOCUMENT_SEPARATOR
from memstream.memory.model import Memory
from memstream.memory.store import MemoryFilter
from memstream.projections.connection import redis_errors, text
from memstream.projections.schema import Fields, Keyspace, from_hash, memory_id_of
from memstream.projections.status import ProjectionStatus

__all__ = ["ProjectionReader"]

_FIELDS = list(Fields.RETURNED)


class ProjectionReader:
    def __init__(self, client: redis.Redis, keyspace: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._status = ProjectionStatus(client, keyspace, url=url)
        self._url = url

    def memories(self, tenant: str, where: MemoryFilter | None = None) -> list[Memory]:
        """The memories of `tenant` in the live generation (those `where` matches), oldest
        first."""
        keys = self._status.live()
        with redis_errors(self._url, "reading memories"):
            members = self._client.zrange(keys.order(tenant), 0, -1)
            pipe = self._client.pipeline(transaction=False)
            for member in members:
                memory_id = memory_id_of(text(member))
                pipe.hmget(keys.memory(tenant, memory_id), _FIELDS)
            rows = pipe.execute()
        found = [_memory(row) for row in rows if row[0] is not None]
        matching = [m for m in found if where is None or where.matches(m)]
        return sorted(matching, key=lambda m: (m.timestamp, m.id))

    def memories_by_id(self, tenant: str, ids: Sequence[str]) -> list[Memory | None]:
        """The memories of `tenant` with these ids in the live generation (None: not stored),
        in the order asked, in one round trip."""

        def reads(pipe: redis.client.Pipeline, keys: Keyspace) -> None:
            for memory_id in ids:
                pipe.hmget(keys.memory(tenant, memory_id), _FIELDS)

        rows = self._status.read_live(reads, "reading memories")
        return [_memory(row) if row[0] is not None else None for row in rows]

    def documents(self, tenant: str, collection: str) -> dict[str, str]:
        """The tenant's documents of `collection` in the live generation: key -> JSON (all
        the tenant's documents are read: a few views, their results and tasks)."""
        prefix = f"{collection}{DOCUMENT_SEPARATOR}"

        def reads(pipe: redis.client.Pipeline, keys: Keyspace) -> None:
            pipe.hgetall(keys.documents(tenant))

        (stored,) = self._status.read_live(reads, "reading documents")
        named = ((text(f), text(body)) for f, body in stored.items())
        return {f[len(prefix) :]: body for f, body in named if f.startswith(prefix)}


def _memory(row: Sequence[bytes | None]) -> Memory:
    pairs = zip(_FIELDS, row, strict=True)
    return from_hash({name: value.decode() for name, value in pairs if value is not None})
