"""Reads pinned to the live generation on an asyncio connection (the worker's positions, the
HTTP API's tombstones): queued for the generation last seen, in one transaction with a read of
the live one, and queued again for that one when a swap has moved it since, as
`ProjectionStatus.read_live` reads synchronously. One round trip unless a swap fell between.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis.asyncio

from memstream.projections.connection import redis_errors
from memstream.projections.schema import Keyspace

__all__ = ["LiveReads"]


class LiveReads:
    """The live generation of `keyspace` as last seen on `client`, and reads pinned to it."""

    def __init__(self, client: redis.asyncio.Redis, keyspace: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._keys = keyspace
        self._url = url
        self._seen = 1  # a swap moves it

    async def read(
        self, reads: Callable[[redis.asyncio.client.Pipeline, Keyspace], object], doing: str
    ) -> list[Any]:
        """The replies of what `reads` queues for the live generation's keys."""
        generation = self._seen
        while True:
            with redis_errors(self._url, doing):
                async with self._client.pipeline(transaction=True) as pipe:
                    pipe.get(self._keys.generation_key)
                    reads(pipe, self._keys.at(generation))
                    raw, *replies = await pipe.execute()
            self._seen = int(raw or 1)
            if self._seen == generation:
                return replies
            generation = self._seen
