"""What the projection has applied so far, read synchronously (for `import --wait` and tests)."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from memstream.memory.events import MemoryEvent
from memstream.projections.connection import redis_errors
from memstream.projections.schema import Keyspace

__all__ = ["ProjectionStatus"]


class ProjectionStatus:
    def __init__(self, client: redis.Redis, keyspace: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._keys = keyspace
        self._url = url

    def unapplied(self, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
        """The events of `events` the projection has not applied yet, in order."""
        with redis_errors(self._url, "reading applied markers"):
            pipe = self._client.pipeline(transaction=False)
            for event in events:
                pipe.hexists(self._keys.applied(event.tenant), event.id)
            applied = pipe.execute()
        return [event for event, done in zip(events, applied, strict=True) if not done]

    def memory_count(self, tenant: str) -> int:
        with redis_errors(self._url, "counting memories"):
            return int(self._client.zcard(self._keys.order(tenant)))
