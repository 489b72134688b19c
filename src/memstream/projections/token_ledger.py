"""Tokens spent per day in Redis: one hash a UTC day, `{ns}:tokens:<YYYY-MM-DD>` (field
`<purpose> <tenant>` -> tokens), kept LEDGER_DAYS days (the `TokenLedger` port)."""

from __future__ import annotations

from datetime import date

import redis

from memstream.memory.tenancy import TenantId
from memstream.projections.connection import redis_errors, text

__all__ = ["LEDGER_DAYS", "RedisTokenLedger"]

LEDGER_DAYS = 31


class RedisTokenLedger:
    def __init__(self, client: redis.Redis, namespace: str, *, url: str = "") -> None:
        self._client = client
        self._namespace = namespace
        self._url = url

    def _key(self, day: date) -> str:
        return f"{self._namespace}:tokens:{day.isoformat()}"

    def spend(self, day: date, tenant: TenantId, purpose: str, tokens: int) -> None:
        key = self._key(day)
        with redis_errors(self._url, "counting model tokens"):
            pipe = self._client.pipeline(transaction=True)
            pipe.hincrby(key, f"{purpose} {tenant}", tokens)
            pipe.expire(key, LEDGER_DAYS * 86_400)
            pipe.execute()

    def spent(self, day: date, tenant: TenantId | None = None) -> dict[tuple[str, str], int]:
        with redis_errors(self._url, "reading model tokens"):
            raw: dict[bytes, bytes] = self._client.hgetall(self._key(day))  # type: ignore[assignment]
        spent = {}
        for field, tokens in raw.items():
            # A purpose has no space; a tenant id may (the rest of the field is the tenant).
            purpose, _, owner = text(field).partition(" ")
            if tenant is None or owner == tenant:
                spent[(owner, purpose)] = int(tokens)
        return spent
