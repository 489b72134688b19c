"""What the live projection has applied so far, read synchronously (`--wait`, stats, tests)."""

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

    def live(self) -> Keyspace:
        """The keys of the live generation, read now."""
        with redis_errors(self._url, "reading the live generation"):
            raw = self._client.get(self._keys.generation_key)
        return self._keys.at(int(raw or 1))

    def unapplied(self, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
        """The events of `events` the live projection has not applied yet, in order."""
        keys = self.live()
        with redis_errors(self._url, "reading applied markers"):
            pipe = self._client.pipeline(transaction=False)
            for event in events:
                pipe.hexists(keys.applied(event.tenant), event.id)
            applied = pipe.execute()
        return [event for event, done in zip(events, applied, strict=True) if not done]

    def memory_count(self, tenant: str) -> int:
        with redis_errors(self._url, "counting memories"):
            return int(self._client.zcard(self.live().order(tenant)))
