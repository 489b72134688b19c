"""Sessions' working memory in Redis (memory.ports.WorkingMemoryStore), on an asyncio client:
one hash per session in the tenant's key space, a TTL, and a version that each put compares
and sets in one script (put_session.lua), so two puts racing on one session never both win
(projections/schema.py has the keys).

The server reads and writes sessions on its event loop: a put is two round trips (read the
session, store it) and no thread, as a bare endpoint doing the same I/O would spend.

The tenant's set of sessions is scored by expiry, so a listing drops the sessions whose TTL
ran out (Redis expired their hashes) before it counts.
"""

from __future__ import annotations

import math
import time
from importlib.resources import files

import redis.asyncio

from memstream.errors import StaleSessionError
from memstream.memory.ports import StoredSession
from memstream.projections.connection import redis_errors, text
from memstream.projections.schema import Keyspace

__all__ = ["RedisWorkingMemoryStore"]

_DOCUMENT, _VERSION = "document", "version"
_PUT = files("memstream.projections").joinpath("put_session.lua").read_text()


class RedisWorkingMemoryStore:
    """One shard's sessions, on `client` (which belongs to the event loop using it)."""

    def __init__(self, client: redis.asyncio.Redis, keys: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._keys = keys
        self._url = url
        self._put = client.register_script(_PUT)

    async def get(self, tenant: str, session_id: str) -> StoredSession | None:
        with redis_errors(self._url, "reading a session's working memory"):
            document, version = await self._client.hmget(
                self._keys.session(tenant, session_id), [_DOCUMENT, _VERSION]
            )
        if document is None or version is None:
            return None
        return StoredSession(session_id, text(document), int(version))

    async def put(
        self,
        tenant: str,
        session_id: str,
        document: str,
        *,
        expected_version: int,
        ttl_s: int | None,
        owner: str | None,
    ) -> int:
        expiry = math.inf if ttl_s is None else time.time() + ttl_s
        keys = [
            self._keys.session(tenant, session_id),
            self._keys.sessions(tenant),
            self._keys.session_owners(tenant),
        ]
        ttl = "" if ttl_s is None else ttl_s
        args: list[str | int | float] = [expected_version, document, ttl, expiry, session_id]
        args.append(owner or "")
        with redis_errors(self._url, "storing a session's working memory"):
            stored, version = await self._put(keys=keys, args=args)
        if not stored:
            raise StaleSessionError(
                f"session {session_id!r} is not at version {expected_version}: "
                f"it is at version {version}",
                current=int(version),
            )
        return int(version)

    async def delete(self, tenant: str, session_id: str) -> bool:
        with redis_errors(self._url, "deleting a session's working memory"):
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(self._keys.session(tenant, session_id))
            pipe.zrem(self._keys.sessions(tenant), session_id)
            pipe.hdel(self._keys.session_owners(tenant), session_id)
            deleted, _, _ = await pipe.execute()
        return bool(deleted)

    async def sessions(
        self, tenant: str, *, owner: str | None, offset: int, limit: int
    ) -> tuple[int, list[str]]:
        listing, owners = self._keys.sessions(tenant), self._keys.session_owners(tenant)
        with redis_errors(self._url, "listing sessions"):
            expired = [
                text(s) for s in await self._client.zrangebyscore(listing, "-inf", time.time())
            ]
            if expired:
                pipe = self._client.pipeline(transaction=True)
                pipe.zrem(listing, *expired)
                pipe.hdel(owners, *expired)
                await pipe.execute()
            ids = sorted(text(s) for s in await self._client.zrange(listing, 0, -1))
            if owner is not None and ids:
                held = await self._client.hmget(owners, ids)
                ids = [
                    i for i, o in zip(ids, held, strict=True) if o is not None and text(o) == owner
                ]
        return len(ids), ids[offset : offset + limit]

    async def aclose(self) -> None:
        await self._client.aclose()
