"""API keys of `memstream serve`: created and revoked by the CLI, stored hashed in Redis under
the namespace, checked on every request. A key found valid is trusted for `cache_s` seconds
(MEMSTREAM_SERVER_KEY_CACHE_S, 2 by default) before it is read again: a GET by id costs about
as much as that read, so reading on every request doubled it. A revocation by another process
(`memstream keys revoke`) therefore takes effect within `cache_s`; one by this `ApiKeys`, at
the next request. Unknown keys are never cached: a key created a moment ago works at once.

A key reads `msk_<key id>_<secret>`: the key id (12 hex characters) names it for revocation and
logs, the secret (32 random bytes) is what makes it unguessable. The projection backend's
`ApiKeyStore` (in Redis: `{ns}:apikeys`) holds only the SHA-256 of the whole key (digest ->
JSON: key id, tenant, created). A fast
hash is enough: the keys are random, not passwords, so there is nothing to brute-force.

A `Principal` is what a request acts as: a tenant key confines it to its tenant whatever the
request names; an admin key (or no keys at all, on loopback) may name any tenant.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from memstream.errors import ForbiddenError, InvalidInputError, NotAuthenticatedError
from memstream.memory.ports import ApiKeyStore
from memstream.memory.tenancy import TenantId, validate_tenant

__all__ = ["ApiKey", "ApiKeys", "Principal"]

_PREFIX = "msk_"
# The most verified keys held at once; past it the cache starts over (keys are few: this only
# bounds what a flood of distinct valid keys could hold).
_CACHED_KEYS = 10_000


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as. `tenant` is None for an admin (any tenant it names)."""

    tenant: str | None
    key_id: str = ""

    @property
    def admin(self) -> bool:
        return self.tenant is None

    def tenant_for(self, named: Iterable[str | None], field: str) -> TenantId:
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
                    f"({len(foreign)} value(s)); name only this key's tenant there (where "
                    f"{field} is optional, leave it out), or use that tenant's key"
                )
            return validate_tenant(self.tenant)
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
    def __init__(
        self,
        store: ApiKeyStore,
        *,
        cache_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._cache_s = cache_s
        self._clock = clock
        self._verified: dict[str, tuple[Principal, float]] = {}

    def create(self, tenant: str | None) -> tuple[str, ApiKey]:
        """A new key for `tenant` (None: an admin key); returns the key, shown only now."""
        if tenant is not None:
            validate_tenant(tenant)
        key_id = secrets.token_hex(6)
        key = f"{_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        made = ApiKey(key_id, tenant, datetime.now(UTC))
        body = {"key_id": key_id, "tenant": tenant, "created_at": made.created_at.isoformat()}
        self._store.put(_digest(key), json.dumps(body))
        return key, made

    def revoke(self, key_or_id: str) -> bool:
        """Revoke a key, named by the key itself or by its key id; False if none matched."""
        named = _digest(key_or_id)
        self._verified = {
            digest: held
            for digest, held in self._verified.items()
            if digest != named and held[0].key_id != key_or_id
        }
        if self._store.delete(_digest(key_or_id)):
            return True
        for digest, key in self._stored():
            if key.key_id == key_or_id:
                return self._store.delete(digest)
        return False

    def all(self) -> list[ApiKey]:
        return sorted((key for _, key in self._stored()), key=lambda k: k.created_at)

    def any(self) -> bool:
        return self._store.count() > 0

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
        digest = _digest(key)
        now = self._clock()
        held = self._verified.get(digest)
        if held is not None and held[1] > now:
            return held[0]
        raw = self._store.get(digest)
        if raw is None:
            self._verified.pop(digest, None)
            return None
        stored = _parse(raw)
        principal = Principal(stored.tenant, stored.key_id)
        if self._cache_s > 0:
            if len(self._verified) >= _CACHED_KEYS:
                self._verified.clear()
            self._verified[digest] = (principal, now + self._cache_s)
        return principal

    def fingerprint(self, key: str) -> str:
        """What identifies a key without holding it (its digest, as the store keys it): a
        console session keeps this, not the key."""
        return _digest(key)

    def holds(self, fingerprint: str) -> bool:
        """Whether the key of `fingerprint` still exists (not revoked); read from the store
        every time, so a revocation ends a console session at its next request."""
        return self._store.get(fingerprint) is not None

    def _stored(self) -> list[tuple[str, ApiKey]]:
        return [(digest, _parse(body)) for digest, body in self._store.records().items()]


def _parse(raw: str) -> ApiKey:
    body = json.loads(raw)
    return ApiKey(body["key_id"], body["tenant"], datetime.fromisoformat(body["created_at"]))
