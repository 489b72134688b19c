"""Carrying sessions' working memory from one shard to another in a reshard
(memory.ports.SessionMove): working memory is state, not in the log, so the warm-up that
refills a moved tenant's memories cannot refill its sessions; they are copied instead.

A session is copied as what it is (document, version, remaining TTL to the millisecond, its
entry in the tenant's sessions index and owners), field by field rather than DUMP/RESTORE:
RESTORE is a @dangerous command that no Redis role of projections/acl.py holds. Each copy is
a compare-and-set on the target (WATCH/MULTI): it lands only when the target has no newer
version of the session, so a put that reached the new shard first is never overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import redis

from memstream.memory.tenancy import tenant_from_token
from memstream.projections.connection import redis_errors, text
from memstream.projections.schema import Keyspace

__all__ = ["RedisSessionMove"]

_DOCUMENT, _VERSION = "document", "version"


class RedisSessionMove:
    """Sessions of the tenants `moved` says leave `source` for `target` (both one shard's
    client of the same namespace)."""

    def __init__(
        self,
        source: redis.Redis,
        target: redis.Redis,
        keys: Keyspace,
        *,
        source_url: str = "",
        target_url: str = "",
    ) -> None:
        self._source = source
        self._target = target
        self._keys = keys
        self._source_url = source_url
        self._target_url = target_url

    def copy(
        self, moved: Callable[[str], bool], *, copied: Mapping[str, int] | None = None
    ) -> dict[str, int]:
        """Copy each moving session the target has no newer version of; the versions copied,
        by session key. With `copied` (an earlier pass's answer), a session still at the
        version that pass copied is left alone: the target's copy is the same, or newer, or
        was deleted there on purpose."""
        done: dict[str, int] = {}
        for tenant in self._tenants(moved):
            for key in self._session_keys(tenant):
                with redis_errors(self._source_url, "reading a session to move"):
                    pipe = self._source.pipeline(transaction=True)
                    pipe.hmget(key, [_DOCUMENT, _VERSION])
                    pipe.pttl(key)
                    (document, version), pttl = pipe.execute()
                if document is None or version is None:
                    continue  # expired or deleted since the scan
                if copied is not None and copied.get(key) == int(version):
                    continue
                if self._put(tenant, key, text(document), int(version), int(pttl)):
                    done[key] = int(version)
        return done

    def drop(self, moved: Callable[[str], bool]) -> int:
        """Delete every key of working memory of the moving tenants from the source; the
        number of keys deleted."""
        deleted = 0
        with redis_errors(self._source_url, "dropping the moved sessions"):
            for tenant in self._tenants(moved):
                own = [
                    *self._session_keys(tenant),
                    self._keys.sessions(tenant),
                    self._keys.session_owners(tenant),
                ]
                deleted += int(self._source.unlink(*own))
        return deleted

    def _put(self, tenant: str, key: str, document: str, version: int, pttl_ms: int) -> bool:
        session_id = key[len(self._keys.session(tenant, "")) :]
        with redis_errors(self._source_url, "reading a moving session's index entries"):
            owner = self._source.hget(self._keys.session_owners(tenant), session_id)
            score = self._source.zscore(self._keys.sessions(tenant), session_id)
        with (
            redis_errors(self._target_url, "storing a moved session"),
            self._target.pipeline(transaction=True) as pipe,
        ):
            try:
                pipe.watch(key)  # type: ignore[no-untyped-call]
                there = pipe.hget(key, _VERSION)
                if there is not None and int(there) >= version:
                    return False
                pipe.multi()
                pipe.delete(key)
                pipe.hset(key, mapping={_DOCUMENT: document, _VERSION: version})
                if pttl_ms > 0:
                    pipe.pexpire(key, pttl_ms)
                if score is not None:
                    pipe.zadd(self._keys.sessions(tenant), {session_id: score})
                pipe.hset(self._keys.session_owners(tenant), session_id, text(owner or b""))
                pipe.execute()
            except redis.WatchError:
                return False  # a put on the target came first: it is newer
        return True

    def _tenants(self, moved: Callable[[str], bool]) -> list[str]:
        """The moving tenants with working memory on the source (their sessions index)."""
        prefix = f"{self._keys.namespace}:wm:"
        found: list[str] = []
        with redis_errors(self._source_url, "listing the sessions to move"):
            for raw in self._source.scan_iter(match=f"{prefix}*:sessions"):
                token = text(raw)[len(prefix) :].partition(":")[0]
                tenant = tenant_from_token(token)
                if moved(tenant):
                    found.append(tenant)
        return found

    def _session_keys(self, tenant: str) -> list[str]:
        pattern = f"{self._keys.session(tenant, '')}*"
        with redis_errors(self._source_url, "listing the sessions to move"):
            return [text(raw) for raw in self._source.scan_iter(match=pattern)]
