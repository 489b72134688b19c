"""API keys over the `ApiKeyStore` port: what the server decides about a key, whatever the
backend keeps its records in (the Redis store is exercised by the server's integration
tests)."""

from __future__ import annotations

import pytest

from memstream.errors import NotAuthenticatedError
from memstream.server.keys import ApiKeys, Principal


class DictKeyStore:
    """The port, in a dict: digest -> record."""

    def __init__(self) -> None:
        self.records_by_digest: dict[str, str] = {}

    def put(self, digest: str, record: str) -> None:
        self.records_by_digest[digest] = record

    def get(self, digest: str) -> str | None:
        return self.records_by_digest.get(digest)

    def delete(self, digest: str) -> bool:
        return self.records_by_digest.pop(digest, None) is not None

    def records(self) -> dict[str, str]:
        return dict(self.records_by_digest)

    def count(self) -> int:
        return len(self.records_by_digest)


def test_a_created_key_acts_for_its_tenant_and_only_its_digest_is_stored() -> None:
    store = DictKeyStore()
    keys = ApiKeys(store)
    key, made = keys.create("acme")
    assert keys.principal(key) == Principal("acme", made.key_id)
    assert keys.authenticate(f"Bearer {key}", keyless=False) == Principal("acme", made.key_id)
    assert all(key not in digest + record for digest, record in store.records().items())
    assert [k.key_id for k in keys.all()] == [made.key_id]


def test_a_key_revoked_by_its_id_is_refused_at_the_next_request() -> None:
    keys = ApiKeys(DictKeyStore())
    key, made = keys.create(None)
    assert keys.principal(key) == Principal(None, made.key_id)
    assert keys.revoke(made.key_id) is True
    assert keys.principal(key) is None
    with pytest.raises(NotAuthenticatedError, match="unknown or revoked"):
        keys.authenticate(f"Bearer {key}", keyless=True)
    assert keys.revoke(made.key_id) is False


def test_without_keys_a_keyless_server_acts_as_admin_until_one_exists() -> None:
    keys = ApiKeys(DictKeyStore())
    assert keys.authenticate(None, keyless=True) == Principal(None)
    keys.create("acme")
    with pytest.raises(NotAuthenticatedError, match="needs an API key"):
        keys.authenticate(None, keyless=True)
