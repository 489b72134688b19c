"""The server's API keys in Redis: one hash per namespace, `{ns}:apikeys` (digest -> record).

What a key is and how a request is checked against it is the server's (`server.api_keys`); this
module only stores the records, so the keys live beside the memories they guard.
"""

from __future__ import annotations

import redis

from memstream.projections.connection import redis_errors, text

__all__ = ["RedisApiKeyStore"]


class RedisApiKeyStore:
    def __init__(self, client: redis.Redis, namespace: str, *, url: str = "") -> None:
        self._client = client
        self._hash = f"{namespace}:apikeys"
        self._url = url

    def put(self, digest: str, record: str) -> None:
        with redis_errors(self._url, "storing an API key"):
            self._client.hset(self._hash, digest, record)

    def get(self, digest: str) -> str | None:
        with redis_errors(self._url, "checking an API key"):
            raw = self._client.hget(self._hash, digest)
        return None if raw is None else text(raw)

    def delete(self, digest: str) -> bool:
        with redis_errors(self._url, "revoking an API key"):
            return bool(self._client.hdel(self._hash, digest))

    def records(self) -> dict[str, str]:
        with redis_errors(self._url, "listing API keys"):
            raw: dict[bytes, bytes] = self._client.hgetall(self._hash)  # type: ignore[assignment]
        return {text(digest): text(record) for digest, record in raw.items()}

    def count(self) -> int:
        with redis_errors(self._url, "counting API keys"):
            return int(self._client.hlen(self._hash))
