"""Redis clients, created in one place, and the translation of driver errors at the boundary.

Every client comes from `redis_client` or `async_redis_client`, given a URL (the local stack,
a bench's own server) or a `RedisConnection`: the URL with the TLS files (`rediss://`) and the
ACL user of the settings, translated once into redis-py's options.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio

from memstream.config import Settings
from memstream.errors import ConfigurationError, RedisLoadingError, RedisUnavailableError

__all__ = [
    "COMPACT_AFTER",
    "ReadScript",
    "RedisConnection",
    "async_redis_client",
    "compact",
    "compact_async",
    "is_missing_index",
    "redis_client",
    "redis_errors",
    "rewrite_persistence",
    "search_pipelined",
    "text",
]

_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class RedisConnection:
    """A Redis URL and what the settings add to it: an ACL user and password (which replace
    any in the URL) and, for `rediss://`, the CA file and a client certificate for mutual
    TLS. Its repr and `where` never show the password."""

    url: str
    username: str = ""
    password: str = field(default="", repr=False)
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisConnection:
        return cls(
            url=settings.redis,
            username=settings.redis_username,
            password=settings.redis_password,
            ca_file=settings.redis_ca_file,
            cert_file=settings.redis_cert_file,
            key_file=settings.redis_key_file,
        )

    @property
    def where(self) -> str:
        """The URL without its password, for messages."""
        return _safe(self.url)

    def options(self) -> tuple[str, dict[str, Any]]:
        """redis-py's URL and keyword arguments (`from_url`)."""
        url = self.url
        options: dict[str, Any] = {}
        if self.username or self.password:
            # redis-py lets the URL's user and password win over keyword arguments: drop them
            # from the URL so the settings' own variables are the ones used.
            parts = urlsplit(url)
            url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
            options |= {"username": self.username or None, "password": self.password or None}
        if url.startswith("rediss://"):
            options |= {
                key: value
                for key, value in (
                    ("ssl_ca_certs", self.ca_file),
                    ("ssl_certfile", self.cert_file),
                    ("ssl_keyfile", self.key_file),
                )
                if value
            }
        return url, options


def redis_client(target: str | RedisConnection) -> redis.Redis:
    url, options = _options(target)
    return redis.Redis.from_url(
        url, socket_timeout=_TIMEOUT_S, socket_connect_timeout=_TIMEOUT_S, **options
    )


def async_redis_client(target: str | RedisConnection) -> redis.asyncio.Redis:
    url, options = _options(target)
    return redis.asyncio.Redis.from_url(
        url, socket_timeout=_TIMEOUT_S, socket_connect_timeout=_TIMEOUT_S, **options
    )


def _options(target: str | RedisConnection) -> tuple[str, dict[str, Any]]:
    return (target, {}) if isinstance(target, str) else target.options()


@contextmanager
def redis_errors(url: str, doing: str) -> Iterator[None]:
    """Map the driver's connection failures to RedisUnavailableError; let the rest through.

    Only failures to reach the server are retryable unavailability; a wrong query or a
    missing module is a bug or a misconfiguration and keeps its own error.
    """
    try:
        yield
    except redis.BusyLoadingError as exc:
        raise RedisLoadingError(
            f"Redis at {_safe(url)} is loading its data after a restart and cannot serve "
            f"{doing} yet; retry in a few seconds (`memstream status` shows when it is ready; "
            "docs/operations.md says how to keep restarts short)."
        ) from exc
    except redis.exceptions.NoPermissionError as exc:
        raise ConfigurationError(
            f"the Redis user at {_safe(url)} may not do what {doing} needs ({exc}); give it "
            "the rights of its role (`memstream acls` prints them; docs/operations.md, "
            "Security)."
        ) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise RedisUnavailableError(
            f"Redis at {_safe(url)} did not answer while {doing}: {str(exc).rstrip('.')}. "
            "Check that it runs "
            "(`memstream status`), that MEMSTREAM_REDIS_URL points at it and that its user, "
            "password and certificates (MEMSTREAM_REDIS_*) are the server's."
        ) from exc


# After a large delete, Redis's append-only file still holds every write of what was deleted,
# and a restart replays all of it (docs/operations.md); Redis's own policy rewrites only when
# the file has doubled, which deletes never make it do. Smaller deletes are not worth a rewrite.
COMPACT_AFTER = 10_000


def compact(client: redis.Redis, deleted: int) -> bool:
    """After `deleted` keys (or memories) were deleted at once: start a background rewrite of
    the append-only file if there were at least COMPACT_AFTER and Redis keeps one. False when
    it did not start one (too few, no file, a rewrite is running already, or the ACL user may
    not: then Redis's own rewrite policy is left to do it)."""
    if deleted < COMPACT_AFTER:
        return False
    try:
        if client.config_get("appendonly").get("appendonly") != "yes":
            return False
        client.bgrewriteaof()
    except redis.exceptions.NoPermissionError:
        return False  # an ACL user without @admin (docs/operations.md): Redis's own policy
    except redis.ResponseError as exc:
        if "in progress" not in str(exc):
            raise
        return False
    return True


async def compact_async(client: redis.asyncio.Redis, deleted: int) -> bool:
    """`compact` on an asyncio client."""
    if deleted < COMPACT_AFTER:
        return False
    try:
        if (await client.config_get("appendonly")).get("appendonly") != "yes":
            return False
        await client.bgrewriteaof()
    except redis.exceptions.NoPermissionError:
        return False  # as in `compact`
    except redis.ResponseError as exc:
        if "in progress" not in str(exc):
            raise
        return False
    return True


def rewrite_persistence(client: redis.Redis, timeout_s: float = 300.0) -> list[str]:
    """Rewrite Redis's files from what it holds now, and wait until they are written: the
    append-only file (a rewrite started after this call: one already running may predate a
    deletion, so it is waited out first) and, where Redis keeps RDB snapshots, the snapshot.
    Redis then deletes the old files, and what was deleted from memory is gone from its disk
    (an erasure, docs/erasure.md). Returns what it rewrote ("aof", "rdb")."""
    deadline = time.monotonic() + timeout_s
    done: list[str] = []

    def persistence() -> dict[str, object]:
        info: dict[str, object] = client.info("persistence")
        return info

    def wait(busy: str) -> None:
        while True:
            info = persistence()
            if not info.get(busy) and not info.get("aof_rewrite_scheduled"):
                return
            if time.monotonic() > deadline:
                raise RedisUnavailableError(
                    f"Redis did not finish rewriting its files within {timeout_s:.0f}s "
                    f"({busy}); run the erasure again once it has (INFO persistence)"
                )
            time.sleep(0.05)  # polls INFO: Redis has no call that waits for a rewrite

    def rewrite(start: Callable[[], object], busy: str, status: str, what: str) -> None:
        wait(busy)
        start()
        wait(busy)
        if persistence().get(status) != "ok":
            raise RedisUnavailableError(f"Redis failed to {what}; see its log")

    if str(persistence().get("aof_enabled")) == "1":
        rewrite(
            client.bgrewriteaof,
            "aof_rewrite_in_progress",
            "aof_last_bgrewrite_status",
            "rewrite its append-only file",
        )
        done.append("aof")
    if _keeps_snapshots(client, persistence()):
        rewrite(
            client.bgsave,
            "rdb_bgsave_in_progress",
            "rdb_last_bgsave_status",
            "write its RDB snapshot",
        )
        done.append("rdb")
    return done


def _keeps_snapshots(client: redis.Redis, info: Mapping[str, object]) -> bool:
    """Whether Redis may hold an RDB snapshot. A user without CONFIG rights (the importer's
    least-privilege role, docs/operations.md) cannot ask, and then a snapshot is written
    anyway: an old one could hold what was erased."""
    if int(str(info.get("rdb_saves", 0))) > 0:
        return True
    try:
        return bool(client.config_get("save").get("save"))
    except redis.exceptions.NoPermissionError:
        return True


def search_pipelined(
    client: redis.Redis, commands: Sequence[Sequence[Any]], *, url: str, doing: str
) -> list[object] | None:
    """Replies of the search `commands`, sent in one round trip; None when the index does not
    exist yet (a namespace no worker has started: nothing to find, not an error)."""
    with redis_errors(url, doing):
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)  # type: ignore[no-untyped-call]
        try:
            return list(pipe.execute())
        except redis.ResponseError as exc:
            if is_missing_index(exc):
                return None
            raise


class ReadScript:
    """A read-only Lua script, run with EVALSHA_RO (and EVAL_RO, which caches it, when Redis
    does not know it yet): a replica may answer it, and the ACL roles that only read may run
    it (projections.acl)."""

    def __init__(self, client: redis.Redis, source: str, *, url: str, doing: str) -> None:
        self._client = client
        self._source = source
        self._sha = hashlib.sha1(source.encode("utf-8"), usedforsecurity=False).hexdigest()
        self._url = url
        self._doing = doing

    def read(self, args: Sequence[str | int | bytes]) -> Any:
        """The script's reply for `args` (ARGV; it declares no keys)."""
        with redis_errors(self._url, self._doing):
            try:
                return self._client.evalsha_ro(self._sha, 0, *args)
            except redis.exceptions.NoScriptError:
                return self._client.eval_ro(self._source, 0, *args)


def is_missing_index(exc: redis.ResponseError) -> bool:
    """Whether the search module refused because the index does not exist (yet): its wording
    differs between commands and versions ("no such index", "Unknown Index name")."""
    message = str(exc).lower()
    return "no such index" in message or "unknown index" in message


def text(value: object) -> str:
    """A value as Redis returned it (bytes, or str with decode_responses) as text."""
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _safe(url: str) -> str:
    """The URL without its password, for error messages."""
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.rpartition('@')[2]}"
