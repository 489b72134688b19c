"""Tenant ids: the one check every tenant id passes before it reaches a key, a query or an event.

A tenant id is any string of 1 to 256 characters without control, format or unassigned
characters. Ids are compared exactly (no case folding, no trimming, no normalisation), so
"Acme" and "acme" are two tenants. Wherever an id must survive a syntax that gives characters
a meaning (Redis keys, RediSearch TAG values), it travels as `tenant_token(id)`: the hex of its
UTF-8 bytes, which has no special characters, no separators and no case to fold.

An id is validated where it comes in (the CLI, HTTP, the framework adapters, the hooks' entry,
a message read from the log) and travels inside as a `TenantId`, which only `validate_tenant`
makes: a check further in (a query, a key, an event) is then a type test, not a second scan.
"""

from __future__ import annotations

import functools
import unicodedata

from memstream.errors import InvalidTenantError

__all__ = [
    "MAX_TENANT_CHARS",
    "TenantId",
    "tenant_from_token",
    "tenant_key",
    "tenant_token",
    "validate_tenant",
]

MAX_TENANT_CHARS = 256


class TenantId(str):
    """A tenant id that `validate_tenant` accepted (it is the only maker): equal to, and used
    as, the plain string."""

    __slots__ = ()


def validate_tenant(tenant: object) -> TenantId:
    """`tenant` as a TenantId if it is a usable tenant id; raise InvalidTenantError saying why
    not. A TenantId passes as it is: it was checked where it came in."""
    if type(tenant) is TenantId:
        return tenant
    if not isinstance(tenant, str):
        raise InvalidTenantError(
            f"a tenant id must be a string, got {type(tenant).__name__}; "
            "pass the tenant's id as text"
        )
    return _checked(tenant)


@functools.lru_cache(maxsize=1024)
def _checked(tenant: str) -> TenantId:
    # Cached: a log read checks the same few ids once per event (a refused id is not cached).
    if not tenant or tenant.isspace():
        raise InvalidTenantError("the tenant id is empty; every memory belongs to a named tenant")
    if len(tenant) > MAX_TENANT_CHARS:
        raise InvalidTenantError(
            f"the tenant id has {len(tenant)} characters, more than {MAX_TENANT_CHARS}; "
            "use a shorter stable id (a UUID or a hash of the long one)"
        )
    for position, char in enumerate(tenant):
        if unicodedata.category(char)[0] == "C":
            raise InvalidTenantError(
                f"the tenant id has the control or unassigned character U+{ord(char):04X} at "
                f"position {position}; tenant ids must be printable text"
            )
    return TenantId(tenant)


def tenant_token(tenant: str) -> str:
    """The tenant id as lowercase hex of its UTF-8 bytes: safe in any key or TAG value."""
    return validate_tenant(tenant).encode("utf-8").hex()


def tenant_from_token(token: str) -> TenantId:
    # Read back from storage, so checked as anything that comes in is.
    return validate_tenant(bytes.fromhex(token).decode("utf-8"))


def tenant_key(tenant: str) -> bytes:
    """The Kafka key of a tenant's events and notices: its id's UTF-8 bytes. One key a tenant
    is what keeps its events in order, on one partition, whoever produces them."""
    return tenant.encode("utf-8")
