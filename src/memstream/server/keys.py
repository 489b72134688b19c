"""API keys of `memstream serve`: created and revoked by the CLI, stored hashed in Redis under
the namespace, checked on every request (so a revocation takes effect at the next request).

A key reads `msk_<key id>_<secret>`: the key id (12 hex characters) names it for revocation and
logs, the secret (32 random bytes) is what makes it unguessable. Redis holds only the SHA-256
of the whole key, in `{ns}:apikeys` (digest -> JSON: key id, tenant, admin, created). A fast
hash is enough: the keys are random, not passwords, so there is nothing to brute-force.

A `Principal` is what a request acts as: a tenant key confines it to its tenant whatever the
request names; an admin key (or no keys at all, on loopback) may name any tenant.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import redis

from memstream.errors import ForbiddenError, InvalidInputError, NotAuthenticatedError
from memstream.memory.tenancy import validate_tenant
from memstream.projections.connection import redis_errors

__all__ = ["ApiKey", "ApiKeys", "Principal"]

_PREFIX = "msk_"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as. `tenant` is None for an admin (any tenant it names)."""

    tenant: str | None
    key_id: str = ""

    @property
    def admin(self) -> bool:
        return self.tenant is None

    def tenant_for(self, named: Iterable[str | None], field: str) -> str:
        """The one tenant a request acts on, from the tenants it names (`field` values).

        A tenant key answers its own tenant, and refuses a request naming any other; an
        admin must name exactly one.
        """
        names = {name for name in named if name is not None}
        if self.tenant is not None:
            foreign = sorted(names - {self.tenant})
            if foreign:
                raise ForbiddenError(
                    f"this key is for one tenant and the request names another in {field} "
                    f"({len(foreign)} value(s)); leave {field} out or use that tenant's key"
                )
            return self.tenant
        if len(names) != 1:
            raise InvalidInputError(
                f"a request with an admin key (or without keys) names exactly one tenant in "
                f"{field}; it names {len(names)}"
            )
        return validate_tenant(names.pop())


@dataclass(frozen=True, slots=True)
class ApiKey:
    key_id: str
    tenant: str | None
    created_at: datetime

    @property
    def admin(self) -> bool:
        return self.tenant is None


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ApiKeys:
    def __init__(self, client: redis.Redis, namespace: str, *, url: str = "") -> None:
        self._client = client
        self._hash = f"{namespace}:apikeys"
        self._url = url

    def create(self, tenant: str | None) -> tuple[str, ApiKey]:
        """A new key for `tenant` (None: an admin key); returns the key, shown only now."""
        if tenant is not None:
            validate_tenant(tenant)
        key_id = secrets.token_hex(6)
        key = f"{_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        made = ApiKey(key_id, tenant, datetime.now(UTC))
        body = {"key_id": key_id, "tenant": tenant, "created_at": made.created_at.isoformat()}
        with redis_errors(self._url, "storing an API key"):
            self._client.hset(self._hash, _digest(key), json.dumps(body))
        return key, made

    def revoke(self, key_or_id: str) -> bool:
        """Revoke a key, named by the key itself or by its key id; False if none matched."""
        with redis_errors(self._url, "revoking an API key"):
            if self._client.hdel(self._hash, _digest(key_or_id)):
                return True
            for digest, key in self._stored():
                if key.key_id == key_or_id:
                    return bool(self._client.hdel(self._hash, digest))
        return False

    def all(self) -> list[ApiKey]:
        with redis_errors(self._url, "listing API keys"):
            return sorted((key for _, key in self._stored()), key=lambda k: k.created_at)

    def any(self) -> bool:
        with redis_errors(self._url, "counting API keys"):
            return bool(self._client.hlen(self._hash))

    def authenticate(self, authorization: str | None, *, keyless: bool) -> Principal:
        """The principal of a request's Authorization header. While no key exists, a request
        without one acts as admin if `keyless` (a server on loopback, or told --insecure);
        otherwise a missing, malformed, unknown or revoked key is refused."""
        if authorization is None:
            if keyless and not self.any():
                return Principal(None)
            raise NotAuthenticatedError(
                "this server needs an API key: send `Authorization: Bearer <key>` "
                "(an operator creates one with `memstream keys create --tenant T`)"
            )
        scheme, _, key = authorization.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise NotAuthenticatedError(
                "the Authorization header must read `Bearer <key>`; nothing else is accepted"
            )
        principal = self.principal(key.strip())
        if principal is None:
            raise NotAuthenticatedError(
                "the API key is unknown or revoked; ask the operator for a current key"
            )
        return principal

    def principal(self, key: str) -> Principal | None:
        """The principal of a presented key, or None when it is unknown or revoked."""
        if not key.startswith(_PREFIX):
            return None
        with redis_errors(self._url, "checking an API key"):
            raw = self._client.hget(self._hash, _digest(key))
        if raw is None:
            return None
        stored = _parse(raw)
        return Principal(stored.tenant, stored.key_id)

    def _stored(self) -> list[tuple[bytes, ApiKey]]:
        raw: dict[bytes, bytes] = self._client.hgetall(self._hash)  # type: ignore[assignment]
        return [(digest, _parse(body)) for digest, body in raw.items()]


def _parse(raw: bytes | str) -> ApiKey:
    body = json.loads(raw)
    return ApiKey(body["key_id"], body["tenant"], datetime.fromisoformat(body["created_at"]))
