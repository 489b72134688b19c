"""API keys over the `ApiKeyStore` port: what the server decides about a key, whatever the
backend keeps its records in (the Redis store is exercised by the server's integration
tests)."""

from __future__ import annotations

import pytest

from memstream.errors import NotAuthenticatedError
from memstream.server.api_keys import ApiKeys, Principal


class DictKeyStore:
    """The port, in a dict: digest -> record."""

    def __init__(self) -> None:
        self.records_by_digest: dict[str, str] = {}
        self.reads = 0

    def put(self, digest: str, record: str) -> None:
        self.records_by_digest[digest] = record

    def get(self, digest: str) -> str | None:
        self.reads += 1
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


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("cache_s", [0.0, 2.0])
def test_a_key_revoked_by_its_id_is_refused_at_the_next_request(cache_s: float) -> None:
    keys = ApiKeys(DictKeyStore(), cache_s=cache_s)
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


def test_a_verified_key_is_read_again_only_after_the_cache_bound() -> None:
    store, clock = DictKeyStore(), Clock()
    keys = ApiKeys(store, cache_s=2.0, clock=clock)
    key, made = keys.create("acme")
    for _ in range(3):
        assert keys.principal(key) == Principal("acme", made.key_id)
    assert store.reads == 1
    clock.now += 2.0
    assert keys.principal(key) == Principal("acme", made.key_id)
    assert store.reads == 2


def test_a_key_revoked_by_another_process_is_refused_within_the_cache_bound() -> None:
    store, clock = DictKeyStore(), Clock()
    keys = ApiKeys(store, cache_s=2.0, clock=clock)
    key, made = keys.create("acme")
    assert keys.principal(key) is not None
    assert ApiKeys(store).revoke(made.key_id)  # `memstream keys revoke`, elsewhere
    clock.now += 1.9
    assert keys.principal(key) is not None  # trusted, as stated, for up to 2 s
    clock.now += 0.1
    assert keys.principal(key) is None
    clock.now += 0.1
    assert keys.principal(key) is None


def test_a_refusal_is_never_cached_and_no_cache_reads_every_time() -> None:
    store = DictKeyStore()
    keys = ApiKeys(store, cache_s=2.0)
    key, made = keys.create("acme")
    saved = dict(store.records_by_digest)
    store.records_by_digest.clear()
    assert keys.principal(key) is None
    store.records_by_digest.update(saved)  # the record is back: the key works at once
    assert keys.principal(key) == Principal("acme", made.key_id)
    uncached = ApiKeys(store)
    reads = store.reads
    assert uncached.principal(key) is not None and uncached.principal(key) is not None
    assert store.reads == reads + 2
