"""Crypto-shredding: the content of events sealed under a per-tenant data key.

Each tenant's content fields (the `sealed` fields of its event type's registry row: queries,
answers, memory texts, summaries, metadata) are encrypted with AES-256-GCM under a data key of
that tenant; routing fields (type, version, id, tenant, thread, times) stay clear, so the log
stays replayable and auditable. Destroying the tenant's data keys (`memstream forget --erase`)
makes every copy of that content in the log unreadable for good: that is the erasure.

    data key   32 random bytes per tenant, named by a random `key_id`; it never leaves a
               process unwrapped. Kept in the keys topic wrapped by the master key.
    master key (KEK) 32 bytes from MEMSTREAM_MASTER_KEY; named by `kek_id`, a fingerprint, so
               a rotation can tell which master key wrapped a record (docs/erasure.md).
    sealed     one field's value: base64(nonce || ciphertext || tag) of the JSON text of the
               field's plaintext wire value, with associated data binding it to the event id,
               the field name, the tenant and the key id: a ciphertext moved to another field,
               event or tenant does not open.

This module is pure: the keyring that finds and creates data keys is a port (`Keyring`);
`KeyringState` is the state a keyring builds from the key records it reads, shared by the
Kafka keyring (streams.data_keys) and tests.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memstream.errors import (
    ConfigurationError,
    DataKeyErasedError,
    SealedEventError,
    UnknownDataKeyError,
)

__all__ = [
    "ALGORITHM",
    "CLOCK_KEY",
    "ERASED",
    "DataKey",
    "InProcessKeyring",
    "KeyRecord",
    "Keyring",
    "KeyringState",
    "MasterKeys",
    "clock_tick",
    "erased_marker",
    "new_data_key",
    "open_field",
    "parse_master_key",
    "record_key",
    "seal_field",
    "unknown_key",
]

log = logging.getLogger(__name__)

ALGORITHM = "A256GCM"
_NONCE = 12
_KEY_BYTES = 32


@dataclass(frozen=True, slots=True, repr=False)
class DataKey:
    """One tenant data key, unwrapped (never printed: its repr hides the secret). `aead` is
    the cipher over the secret, made once: making it costs as much as opening a field."""

    tenant: str
    key_id: str
    secret: bytes
    aead: AESGCM = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "aead", AESGCM(self.secret))

    def __repr__(self) -> str:
        return f"DataKey(tenant={self.tenant!r}, key_id={self.key_id!r})"


def new_data_key(tenant: str) -> DataKey:
    return DataKey(tenant, os.urandom(16).hex(), AESGCM.generate_key(bit_length=256))


class Keyring(Protocol):
    """Where the codec gets data keys: `current` to seal (creating the tenant's first key if it
    has none), `lookup` to open. `lookup` raises DataKeyErasedError for a destroyed key and
    UnknownDataKeyError for one it cannot find."""

    def current(self, tenant: str) -> DataKey: ...

    def lookup(self, tenant: str, key_id: str) -> DataKey: ...

    def forget(self, tenant: str, key_ids: Iterable[str]) -> None:
        """Treat `key_ids` as destroyed from now on (a TenantErased was read)."""
        ...

    @property
    def unconfirmed(self) -> bool:
        """Whether a key `current` handed out may not be durable yet (`confirm` would wait):
        asked first, so that a writer pays nothing in the usual case."""
        ...

    def confirm(self, timeout_s: float) -> None:
        """Return once every key `current` handed out is durable where readers find it;
        KafkaUnavailableError if that takes longer than `timeout_s`. What is sealed under a
        key must not be reported durable before its key is: without the key it is lost."""
        ...


class _Nonces:
    """Random 96-bit nonces from the OS, drawn in batches. os.urandom releases the GIL, and on
    the agent's path (sealing inside a turn) every release lets another thread (the publisher's
    poller) in for up to the interpreter's switch interval: drawn one by one, they doubled the
    hook's p99. A batch is never shared with a forked child (the pid is checked)."""

    _BATCH = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._at = 0
        self._pid = 0

    def next(self) -> bytes:
        with self._lock:
            if self._pid != os.getpid() or self._at + _NONCE > len(self._pool):
                self._pool, self._at, self._pid = os.urandom(_NONCE * self._BATCH), 0, os.getpid()
            nonce = self._pool[self._at : self._at + _NONCE]
            self._at += _NONCE
            return nonce


_nonces = _Nonces()


def _aad(event_id: str, name: str, tenant: str, key_id: str) -> bytes:
    """`json.dumps(["memstream.sealed.v1", event_id, name, tenant, key_id])`, the bytes every
    sealed field is bound to, built from parts shared by the fields of one event (sealing or
    opening one is a few microseconds: this was a third of it)."""
    head, tail = _aad_parts(event_id, tenant, key_id)
    return head + _aad_name(name) + tail


@functools.lru_cache(maxsize=64)
def _aad_name(name: str) -> bytes:
    return json.dumps(name).encode()


@functools.lru_cache(maxsize=64)
def _aad_parts(event_id: str, tenant: str, key_id: str) -> tuple[bytes, bytes]:
    head = f'["memstream.sealed.v1", {json.dumps(event_id)}, '
    return head.encode(), f", {json.dumps(tenant)}, {json.dumps(key_id)}]".encode()


# What json.dumps(value, ensure_ascii=False, separators=(",", ":")) would build per call.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _json_value(plain: bytes) -> object:
    # Most sealed fields are strings without escapes: their JSON is the text in quotes.
    if plain[:1] == b'"' and b"\\" not in plain:
        return plain[1:-1].decode()
    return json.loads(plain.decode())


def seal_field(key: DataKey, event_id: str, name: str, value: object) -> str:
    """The sealed form of one field's wire value (any JSON value)."""
    plain = _COMPACT.encode(value).encode()
    nonce = _nonces.next()
    sealed = key.aead.encrypt(nonce, plain, _aad(event_id, name, key.tenant, key.key_id))
    return base64.b64encode(nonce + sealed).decode("ascii")


def open_field(key: DataKey, event_id: str, name: str, sealed: object) -> object:
    """The wire value `seal_field` sealed; SealedEventError if it was altered or moved."""
    if not isinstance(sealed, str):
        raise SealedEventError(f"sealed field {name!r} must be base64 text, got {sealed!r}")
    try:
        raw = base64.b64decode(sealed, validate=True)
        plain = key.aead.decrypt(
            raw[:_NONCE], raw[_NONCE:], _aad(event_id, name, key.tenant, key.key_id)
        )
        return _json_value(plain)
    except (binascii.Error, ValueError, InvalidTag):
        raise SealedEventError(
            f"sealed field {name!r} does not open under data key {key.key_id} of tenant "
            f"{key.tenant!r}: it was altered, or moved from another event, field or tenant"
        ) from None


def parse_master_key(raw: str, where: str) -> bytes:
    """32 bytes from base64 text; ConfigurationError saying how to make one if it is not."""
    try:
        key = base64.b64decode(raw.strip(), validate=True)
    except binascii.Error:
        key = b""
    if len(key) != _KEY_BYTES:
        raise ConfigurationError(
            f"{where} must be 32 random bytes in base64 (44 characters); make one with "
            '`python -c "import base64,os;print(base64.b64encode(os.urandom(32)).decode())"`'
        )
    return key


@dataclass(frozen=True, slots=True, repr=False)
class MasterKeys:
    """The key-encryption keys: `current` wraps new data keys; `previous` (a rotation's old
    keys) still unwrap records not yet re-wrapped. Each is named by its fingerprint."""

    current: bytes
    previous: tuple[bytes, ...] = ()

    def __repr__(self) -> str:
        return f"MasterKeys(current={self.kek_id!r}, previous={len(self.previous)})"

    @staticmethod
    def fingerprint(kek: bytes) -> str:
        return hashlib.sha256(b"memstream.kek\x00" + kek).hexdigest()[:16]

    @property
    def kek_id(self) -> str:
        return self.fingerprint(self.current)

    def wrap(self, key: DataKey) -> KeyRecord:
        nonce = os.urandom(_NONCE)
        aad = _aad("", "data-key", key.tenant, key.key_id)
        wrapped = nonce + AESGCM(self.current).encrypt(nonce, key.secret, aad)
        return KeyRecord(
            tenant=key.tenant,
            key_id=key.key_id,
            kek_id=self.kek_id,
            wrapped=base64.b64encode(wrapped).decode("ascii"),
            created_at=datetime.now(UTC).isoformat(),
        )

    def unwrap(self, record: KeyRecord) -> DataKey:
        by_id = {self.fingerprint(k): k for k in (self.current, *self.previous)}
        kek = by_id.get(record.kek_id)
        if kek is None:
            raise SealedEventError(
                f"data key {record.key_id} of tenant {record.tenant!r} is wrapped by master key "
                f"{record.kek_id}, which this process does not have (it has "
                f"{', '.join(sorted(by_id))}); set MEMSTREAM_PREVIOUS_MASTER_KEYS to the old key "
                "during a rotation (docs/erasure.md)"
            )
        raw = base64.b64decode(record.wrapped)
        try:
            aad = _aad("", "data-key", record.tenant, record.key_id)
            secret = AESGCM(kek).decrypt(raw[:_NONCE], raw[_NONCE:], aad)
        except InvalidTag:
            raise SealedEventError(
                f"data key {record.key_id} of tenant {record.tenant!r} does not unwrap: its "
                "record was altered"
            ) from None
        return DataKey(record.tenant, record.key_id, secret)


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A data key as the keys topic holds it: wrapped by the master key `kek_id`."""

    tenant: str
    key_id: str
    kek_id: str
    wrapped: str
    created_at: str

    @property
    def record_key(self) -> bytes:
        return record_key(self.tenant, self.key_id)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "tenant": self.tenant,
                "key_id": self.key_id,
                "kek_id": self.kek_id,
                "wrapped": self.wrapped,
                "created_at": self.created_at,
            }
        ).encode()


# The record key of a tenant's erasure marker in the keys topic: no data key is named so.
ERASED = "erased"


def record_key(tenant: str, name: str) -> bytes:
    """Keys-topic record key: one record per (tenant, key id), and one erasure marker per
    tenant; a JSON array keeps any tenant id apart from the name."""
    return json.dumps([tenant, name], ensure_ascii=False).encode()


# The keys topic's clock: a record a worker writes every MEMSTREAM_KEYS_CLOCK_S so that the
# active segment rolls (it rolls only on a write after segment.ms) and an erasure's tombstones
# are compacted on an idle topic too. No tenant id is empty (memory.tenancy), so it names none.
CLOCK_KEY = record_key("", "clock")


def clock_tick() -> bytes:
    return json.dumps({"clock": datetime.now(UTC).isoformat()}).encode()


def erased_marker(tenant: str, key_ids: Iterable[str]) -> bytes:
    return json.dumps(
        {
            "tenant": tenant,
            "erased": sorted(set(key_ids)),
            "erased_at": datetime.now(UTC).isoformat(),
        },
        ensure_ascii=False,
    ).encode()


@dataclass
class KeyringState:
    """What a keyring knows from the keys topic, in the order it read the records.

    A tenant may have several live keys (two processes creating its first key at once each
    write one; both records survive compaction, being keyed by tenant and key id, and every
    event names the key it was sealed with). Sealing uses the tenant's first key read (the
    lowest offset: every reader picks the same). Tombstones remove keys; an erasure marker
    (never tombstoned, it holds no secret) remembers the destroyed key ids after compaction
    has removed the tombstones, so a reader can tell "erased" from "unknown".
    """

    masters: MasterKeys
    _records: dict[tuple[str, str], KeyRecord] = field(default_factory=dict)
    # Each tenant's live key ids in the order read (dicts keep it): the first one seals.
    _by_tenant: dict[str, dict[str, None]] = field(default_factory=dict)
    _unwrapped: dict[tuple[str, str], DataKey] = field(default_factory=dict)
    _erased: dict[str, set[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Take in one record of the keys topic (a tombstone when `value` is None)."""
        if key == CLOCK_KEY:
            return
        try:
            tenant, name = json.loads(key or b"")
            body = json.loads(value) if value is not None else None
            record = KeyRecord(**body) if body is not None and name != ERASED else None
            erased = set(body["erased"]) if body is not None and name == ERASED else set()
        except (ValueError, TypeError, KeyError):
            log.warning("ignored a record of the keys topic that memstream did not write")
            return
        with self._lock:
            if name == ERASED:
                self._erased.setdefault(tenant, set()).update(erased)
                return
            if record is None:
                self._drop(tenant, name)
                return
            self._records[(tenant, name)] = record
            self._by_tenant.setdefault(tenant, {})[name] = None
            self._unwrapped.pop((tenant, name), None)  # a re-wrapped record: unwrap again
            self._erased.get(tenant, set()).discard(name)

    def forget(self, tenant: str, key_ids: Iterable[str]) -> None:
        """Drop keys an erasure destroyed (a TenantErased read before the tombstones were)."""
        with self._lock:
            for key_id in key_ids:
                self._drop(tenant, key_id)

    def _drop(self, tenant: str, key_id: str) -> None:
        self._records.pop((tenant, key_id), None)
        self._unwrapped.pop((tenant, key_id), None)
        self._by_tenant.get(tenant, {}).pop(key_id, None)
        self._erased.setdefault(tenant, set()).add(key_id)

    def first(self, tenant: str) -> DataKey | None:
        """The tenant's key for sealing: its first live key read, if it has one."""
        with self._lock:
            key_id = next(iter(self._by_tenant.get(tenant, ())), None)
        return None if key_id is None else self.find(tenant, key_id)

    def find(self, tenant: str, key_id: str) -> DataKey | None:
        """The unwrapped key, None if not known; DataKeyErasedError if it was destroyed."""
        with self._lock:
            known = self._unwrapped.get((tenant, key_id))
            if known is not None:
                return known
            record = self._records.get((tenant, key_id))
            if record is None:
                if key_id in self._erased.get(tenant, ()):
                    raise DataKeyErasedError(
                        f"data key {key_id} of tenant {tenant!r} was destroyed by an erasure; "
                        "the event's content is gone for good"
                    )
                return None
            key = self.masters.unwrap(record)
            self._unwrapped[(tenant, key_id)] = key
            return key

    def require(self, tenant: str, key_id: str) -> DataKey:
        """`find`, but an unknown key is an UnknownDataKeyError."""
        key = self.find(tenant, key_id)
        if key is None:
            raise unknown_key(tenant, key_id)
        return key

    def key_ids(self, tenant: str) -> list[str]:
        """The tenant's live key ids, in the order they were read."""
        with self._lock:
            return list(self._by_tenant.get(tenant, ()))

    def erased(self, tenant: str) -> set[str]:
        with self._lock:
            return set(self._erased.get(tenant, ()))

    def records(self) -> Mapping[tuple[str, str], KeyRecord]:
        with self._lock:
            return dict(self._records)


def unknown_key(tenant: str, key_id: str) -> UnknownDataKeyError:
    return UnknownDataKeyError(
        f"the event is sealed under data key {key_id} of tenant {tenant!r}, which is not in "
        "the keys topic this reader follows; check MEMSTREAM_NAMESPACE (the keys topic is "
        "{namespace}.keys), or the event came from a producer with its own keys"
    )


class InProcessKeyring:
    """A keyring held in memory (tests, in-process use): creates a tenant's key on first use;
    `erase` destroys them."""

    def __init__(self, masters: MasterKeys | None = None) -> None:
        self.state = KeyringState(masters or MasterKeys(AESGCM.generate_key(bit_length=256)))

    def current(self, tenant: str) -> DataKey:
        key = self.state.first(tenant)
        if key is None:
            key = new_data_key(tenant)
            record = self.state.masters.wrap(key)
            self.state.apply(record.record_key, record.encode())
            key = self.state.first(tenant) or key
        return key

    def lookup(self, tenant: str, key_id: str) -> DataKey:
        return self.state.require(tenant, key_id)

    def forget(self, tenant: str, key_ids: Iterable[str]) -> None:
        self.state.forget(tenant, key_ids)

    # Its keys live in this process: held as soon as made.
    unconfirmed = False

    def confirm(self, timeout_s: float) -> None:
        return None

    def erase(self, tenant: str) -> list[str]:
        ids = self.state.key_ids(tenant)
        for key_id in ids:
            self.state.apply(record_key(tenant, key_id), None)
        return ids
