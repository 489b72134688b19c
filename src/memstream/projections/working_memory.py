"""Sessions' working memory in Redis (memory.ports.WorkingMemoryStore): one hash per session
in the tenant's key space, a TTL, and a version that each put compares and sets inside
WATCH/MULTI, so two puts racing on one session never both win (projections/schema.py has
the keys).

The tenant's set of sessions is scored by expiry, so a listing drops the sessions whose TTL
ran out (Redis expired their hashes) before it counts.
"""

from __future__ import annotations

import math
import time

import redis

from memstream.errors import StaleSessionError
from memstream.memory.ports import StoredSession
from memstream.projections.connection import redis_errors, text
from memstream.projections.schema import Keyspace

__all__ = ["RedisWorkingMemoryStore"]

_DOCUMENT, _VERSION = "document", "version"


class RedisWorkingMemoryStore:
    def __init__(self, client: redis.Redis, keys: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._keys = keys
        self._url = url

    def get(self, tenant: str, session_id: str) -> StoredSession | None:
        with redis_errors(self._url, "reading a session's working memory"):
            document, version = self._client.hmget(
                self._keys.session(tenant, session_id), [_DOCUMENT, _VERSION]
            )
        if document is None or version is None:
            return None
        return StoredSession(session_id, text(document), int(version))

    def put(
        self,
        tenant: str,
        session_id: str,
        document: str,
        *,
        expected_version: int,
        ttl_s: int | None,
        owner: str | None,
    ) -> int:
        key = self._keys.session(tenant, session_id)
        doing = "storing a session's working memory"
        with redis_errors(self._url, doing), self._client.pipeline() as pipe:
            try:
                pipe.watch(key)  # type: ignore[no-untyped-call]
                raw = pipe.hget(key, _VERSION)
                current = 0 if raw is None else int(raw)
                if current != expected_version:
                    raise _stale(session_id, expected_version, current)
                pipe.multi()
                pipe.hset(key, mapping={_DOCUMENT: document, _VERSION: current + 1})
                if ttl_s is None:
                    pipe.persist(key)
                else:
                    pipe.expire(key, ttl_s)
                expiry = math.inf if ttl_s is None else time.time() + ttl_s
                pipe.zadd(self._keys.sessions(tenant), {session_id: expiry})
                pipe.hset(self._keys.session_owners(tenant), session_id, owner or "")
                pipe.execute()
            except redis.WatchError:
                raise _stale(session_id, expected_version, None) from None
        return current + 1

    def delete(self, tenant: str, session_id: str) -> bool:
        with redis_errors(self._url, "deleting a session's working memory"):
            pipe = self._client.pipeline()
            pipe.delete(self._keys.session(tenant, session_id))
            pipe.zrem(self._keys.sessions(tenant), session_id)
            pipe.hdel(self._keys.session_owners(tenant), session_id)
            deleted, _, _ = pipe.execute()
        return bool(deleted)

    def sessions(
        self, tenant: str, *, owner: str | None, offset: int, limit: int
    ) -> tuple[int, list[str]]:
        listing, owners = self._keys.sessions(tenant), self._keys.session_owners(tenant)
        with redis_errors(self._url, "listing sessions"):
            expired = [text(s) for s in self._client.zrangebyscore(listing, "-inf", time.time())]
            if expired:
                pipe = self._client.pipeline()
                pipe.zrem(listing, *expired)
                pipe.hdel(owners, *expired)
                pipe.execute()
            ids = sorted(text(s) for s in self._client.zrange(listing, 0, -1))
            if owner is not None and ids:
                held = self._client.hmget(owners, ids)
                ids = [
                    i for i, o in zip(ids, held, strict=True) if o is not None and text(o) == owner
                ]
        return len(ids), ids[offset : offset + limit]


def _stale(session_id: str, expected: int, current: int | None) -> StaleSessionError:
    now = "another put came first" if current is None else f"it is at version {current}"
    return StaleSessionError(
        f"session {session_id!r} is not at version {expected}: {now}",
        current=-1 if current is None else current,
    )
