"""Where the shard layout is stored: one key on shard 0, read by every process.

The layout (which Redis holds which partitions, and its version) is a small JSON value under
`{ns}:layout` on shard 0, the first URL of MEMSTREAM_REDIS_SHARDS, which a reshard never moves.
Every process that uses the projection (agents, servers, workers, the CLI) already talks to
shard 0, where the API keys and heartbeats live, so reading the layout costs it one GET and no
other dependency; a write is one atomic script that only moves the version forward. Absent,
the layout is the settings' list, version 1: a deployment that never resharded reads nothing
new.
"""

from __future__ import annotations

import json

import redis

from memstream.memory.ports import ShardLayout
from memstream.projections.connection import redis_errors, text
from memstream.projections.schema import Keyspace

__all__ = ["RedisLayoutStore"]

# KEYS[1]: the layout key. ARGV[1]: the version the caller read (0: none stored), ARGV[2]: the
# new layout. Replaces the stored layout only if it is still the one the caller read.
_PUBLISH = """
local stored = redis.call('GET', KEYS[1])
local version = 0
if stored then version = cjson.decode(stored)['version'] end
if version ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""


class RedisLayoutStore:
    def __init__(self, client: redis.Redis, keyspace: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._key = keyspace.layout_key
        self._url = url

    def read(self) -> ShardLayout | None:
        """The stored layout; None when none was ever stored (the settings' holds)."""
        with redis_errors(self._url, "reading the shard layout"):
            raw = self._client.get(self._key)
        if raw is None:
            return None
        body = json.loads(text(raw))
        return ShardLayout(tuple(body["urls"]), int(body["version"]))

    def publish(self, layout: ShardLayout, replaces: int) -> bool:
        """Store `layout` if the stored version is still `replaces` (0: none stored); False
        when another process stored a layout meanwhile."""
        body = json.dumps({"version": layout.version, "urls": list(layout.urls)})
        with redis_errors(self._url, "storing the shard layout"):
            done = self._client.eval(_PUBLISH, 1, self._key, replaces, body)
        return bool(done)
