"""Redis clients, created in one place, and the translation of driver errors at the boundary."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis
import redis.asyncio

from memstream.errors import RedisUnavailableError

__all__ = ["async_redis_client", "is_missing_index", "redis_client", "redis_errors", "text"]

_TIMEOUT_S = 5.0


def redis_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=_TIMEOUT_S, socket_connect_timeout=_TIMEOUT_S)


def async_redis_client(url: str) -> redis.asyncio.Redis:
    return redis.asyncio.Redis.from_url(
        url, socket_timeout=_TIMEOUT_S, socket_connect_timeout=_TIMEOUT_S
    )


@contextmanager
def redis_errors(url: str, doing: str) -> Iterator[None]:
    """Map the driver's connection failures to RedisUnavailableError; let the rest through.

    Only failures to reach the server are retryable unavailability; a wrong query or a
    missing module is a bug or a misconfiguration and keeps its own error.
    """
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise RedisUnavailableError(
            f"Redis at {_safe(url)} did not answer while {doing}: {str(exc).rstrip('.')}. "
            "Check that it runs "
            "(`memstream status`) and that MEMSTREAM_REDIS_URL points at it."
        ) from exc


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
