"""The wire format of memory events: one UTF-8 JSON object per Kafka message, and back.

Kept apart from the events (as the `eventsourcing` library keeps its transcoder apart from
its domain): each field type has one `Transcoding` (how it is written, how it is read and its
JSON Schema), and the registry row of the event's type (`events.REGISTRY`) says its wire
names, version and upcasters. Decoding a payload goes:

    JSON object -> its row, by any name the type was ever written under
                -> sealed fields opened with the tenant's data key (the cipher stage)
                -> upcasters, from the payload's version up to the current one
                -> fields, each read by its type's transcoding
                -> the event, whose id must be the one the payload carries (if it does)

A producer other than memstream may leave out `id` (derived from the fields), `version` (the
current one of the name it writes), `recorded_at` (the Kafka record's timestamp),
`importance` (the configured default), `embedding_model` (the reader's model) and any field
with a default (`metadata`, ...): `DecodeContext` carries what the reader knows for those.

The cipher stage (memory.cipher, docs/erasure.md): `encode_event(event, keyring)` encrypts the
row's `sealed` fields under the tenant's data key and says so in the envelope,
`"sealed": {"key": <key id>, "alg": "A256GCM", "fields": [...]}`; each such field then holds
base64 ciphertext bound to the event id, field name, tenant and key id. Decoding opens them
with the keyring in `DecodeContext` before anything else reads them. A payload without
`sealed` is plaintext and decodes as it always did (old logs, other producers). The id is
derived from the plaintext fields, sealed or not: the same turn has the same id either way.
Every failure is an `EventDecodeError` (a subclass says which kind), never anything else:
the projector dead-letters the message and goes on. No pickles, nothing implicit.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from memstream.errors import (
    EventDecodeError,
    EventIdMismatchError,
    EventKeyMismatchError,
    EventVersionError,
    SealedEventError,
    UnknownEventTypeError,
)
from memstream.memory.cipher import ALGORITHM, Keyring, open_field, seal_field
from memstream.memory.events import REGISTRY, EventType, ExtractedFact, MemoryEvent, Registry
from memstream.memory.model import MemoryType
from memstream.memory.tenancy import tenant_key

__all__ = [
    "ENVELOPE",
    "FILLED_BY_READER",
    "TRANSCODINGS",
    "DecodeContext",
    "Transcoding",
    "check_transcodings",
    "decode_event",
    "decode_identified",
    "encode_event",
]

# The fields every payload has besides its event's own: which type, which version, which id,
# and (for sealed content) which data key.
ENVELOPE = ("type", "version", "id", "sealed")
# Fields a producer may leave out, though the event needs them: the reader fills them in.
FILLED_BY_READER = ("recorded_at", "embedding_model", "importance")


class _WrongType(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Transcoding:
    """One field type on the wire: `encode` to a JSON value, `decode` from one (raising
    _WrongType or ValueError), and the JSON Schema of the encoded value."""

    encode: Callable[[Any], Any]
    decode: Callable[[object], object]
    schema: Mapping[str, Any]


def _same(value: Any) -> Any:
    return value


def _exactly(*types: type) -> Callable[[object], object]:
    def decode(value: object) -> object:
        # bool is an int to Python, never to us: `true` is no turn number.
        if not isinstance(value, types) or isinstance(value, bool) != (bool in types):
            raise _WrongType
        return value

    return decode


def _write_time(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _read_time(value: object) -> datetime:
    if not isinstance(value, str):
        raise _WrongType
    return datetime.fromisoformat(value)  # ValueError: an invalid event, said by the caller


def _read_strings(value: object) -> Mapping[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _WrongType
    return value


def _read_ids(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _WrongType
    return tuple(value)


def _optional(inner: Transcoding) -> Transcoding:
    return Transcoding(
        encode=lambda value: None if value is None else inner.encode(value),
        decode=lambda value: None if value is None else inner.decode(value),
        schema={"anyOf": [dict(inner.schema), {"type": "null"}]},
    )


def _write_facts(facts: tuple[ExtractedFact, ...]) -> list[dict[str, object]]:
    written = []
    for fact in facts:
        item: dict[str, object] = {"text": fact.text, "kind": fact.kind.value}
        if fact.event_date is not None:
            item["event_date"] = _write_time(fact.event_date)
        if fact.topics:
            item["topics"] = list(fact.topics)
        if fact.entities:
            item["entities"] = list(fact.entities)
        if fact.subject:
            item["subject"] = fact.subject
        written.append(item)
    return written


_FACT_FIELDS = frozenset({"text", "kind", "event_date", "topics", "entities", "subject"})


def _read_facts(value: object) -> tuple[ExtractedFact, ...]:
    if not isinstance(value, list):
        raise _WrongType
    facts = []
    for item in value:
        if not isinstance(item, dict) or not item.keys() <= _FACT_FIELDS:
            raise _WrongType
        text, kind, date = item.get("text"), item.get("kind", "fact"), item.get("event_date")
        subject = item.get("subject", "")
        if not isinstance(text, str) or not isinstance(kind, str) or not isinstance(subject, str):
            raise _WrongType
        facts.append(
            ExtractedFact(
                text,
                kind,  # type: ignore[arg-type]  # checked by ExtractedFact: a ValueError
                None if date is None else _read_time(date),
                _read_ids(item.get("topics", [])),
                _read_ids(item.get("entities", [])),
                subject,
            )
        )
    return tuple(facts)


_FACTS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["text"],
        "additionalProperties": False,
        "properties": {
            "text": {"type": "string"},
            "kind": {"type": "string", "enum": ["fact", "preference", "event"]},
            "event_date": {"type": "string", "format": "date-time"},
            "topics": {"type": "array", "items": {"type": "string"}},
            "entities": {"type": "array", "items": {"type": "string"}},
            "subject": {"type": "string"},
        },
    },
}


_TIME = Transcoding(
    _write_time,
    _read_time,
    {"type": "string", "format": "date-time", "description": "ISO-8601 with a time zone"},
)
_TEXT = Transcoding(_same, _exactly(str), {"type": "string"})
_NUMBER = Transcoding(_same, _exactly(int, float), {"type": "number"})

# Each field is read by its annotation (a string: the events module defers annotations).
TRANSCODINGS: Mapping[str, Transcoding] = {
    "str": _TEXT,
    "int": Transcoding(_same, _exactly(int), {"type": "integer"}),
    "float": _NUMBER,
    "bool": Transcoding(_same, _exactly(bool), {"type": "boolean"}),
    "datetime": _TIME,
    "Mapping[str, str]": Transcoding(
        dict, _read_strings, {"type": "object", "additionalProperties": {"type": "string"}}
    ),
    "tuple[str, ...]": Transcoding(list, _read_ids, {"type": "array", "items": {"type": "string"}}),
    "MemoryType": Transcoding(
        str, _exactly(str), {"type": "string", "enum": [t.value for t in MemoryType]}
    ),
    "tuple[ExtractedFact, ...]": Transcoding(_write_facts, _read_facts, _FACTS_SCHEMA),
    "str | None": _optional(_TEXT),
    "int | None": _optional(Transcoding(_same, _exactly(int), {"type": "integer"})),
    "datetime | None": _optional(_TIME),
    "float | None": _optional(_NUMBER),
}


def check_transcodings(registry: Registry) -> None:
    """Every field of every event type has a transcoding; raise TypeError naming one that
    has none. Run when this module loads, so a decode can only fail with EventDecodeError."""
    for row in registry.rows:
        for f in dataclasses.fields(row.event):
            if str(f.type) not in TRANSCODINGS:
                raise TypeError(
                    f"{row.name}.{f.name} is a {f.type}, which the codec cannot read or "
                    "write; add a Transcoding for it to memory/codec.py"
                )


check_transcodings(REGISTRY)


@dataclass(frozen=True, slots=True)
class DecodeContext:
    """What the reader knows of a message besides its payload.

    `key` (the Kafka key, b"" for none) must then be the event's tenant. The others fill
    fields a producer may leave out: `timestamp` (the record's) for `recorded_at`,
    `embedding_model` (the reader's) and `importance` (the configured default). Without them
    those fields are required. `keyring` finds the data keys of sealed events."""

    key: bytes | None = None
    timestamp: datetime | None = None
    embedding_model: str | None = None
    importance: float | None = None
    keyring: Keyring | None = None  # opens sealed content; without it sealed events fail

    def default(self, name: str) -> object | None:
        values = (self.timestamp, self.embedding_model, self.importance)
        return dict(zip(FILLED_BY_READER, values, strict=True)).get(name)


def encode_event(event: MemoryEvent, keyring: Keyring | None = None) -> bytes:
    """The event's wire form; with a `keyring`, its content fields sealed under the tenant's
    data key (the keyring creates the tenant's first key if it has none)."""
    row = REGISTRY.of(event)
    event_id = event.id  # derived (a digest of the fields) at each reading: once here
    body: dict[str, Any] = {"type": row.name, "version": row.version, "id": event_id}
    for f in dataclasses.fields(event):
        body[f.name] = TRANSCODINGS[str(f.type)].encode(getattr(event, f.name))
    if keyring is not None and row.sealed:
        key = keyring.current(event.tenant)
        for name in row.sealed:
            body[name] = seal_field(key, event_id, name, body[name])
        body["sealed"] = {"key": key.key_id, "alg": ALGORITHM, "fields": list(row.sealed)}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def decode_event(raw: bytes, context: DecodeContext | None = None) -> MemoryEvent:
    """Read one message of the memory topic; EventDecodeError says exactly what is wrong."""
    return decode_identified(raw, context)[0]


def decode_identified(raw: bytes, context: DecodeContext | None = None) -> tuple[MemoryEvent, str]:
    """`decode_event`, and the event's id it checked (worked out once: some ids are digests
    of the whole record, and a reader that folds many events needs them again)."""
    context = context or DecodeContext()
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EventDecodeError(f"not a JSON event: {exc}") from None
    if not isinstance(body, dict):
        raise EventDecodeError(f"an event must be a JSON object, got {type(body).__name__}")
    kind = body.get("type")
    found = REGISTRY.named(kind) if isinstance(kind, str) else None
    if found is None or not isinstance(kind, str):
        raise UnknownEventTypeError(
            f"unknown event type {kind!r}; known: {', '.join(REGISTRY.names)}"
        )
    row, newest = found  # the newest version written under this name
    if "sealed" in body:
        body = _opened(kind, body, context.keyring)
    body = _upcast(row, kind, body, body.get("version", newest), newest)
    event = _fields(row, body, context)
    given, derived = body.get("id"), event.id
    if given is not None and given != derived:
        raise EventIdMismatchError(
            f"{kind} carries id {given!r} but its fields give {derived!r}: the event was "
            "altered, or its producer derives ids differently (docs/events.md gives the "
            "derivation and test vectors; or leave `id` out and it is derived)"
        )
    if context.key is not None and context.key != tenant_key(event.tenant):
        raise EventKeyMismatchError(
            f"{kind} of tenant {event.tenant!r} came with "
            f"{f'Kafka key {context.key!r}' if context.key else 'no Kafka key'}; the key must "
            "be the tenant id (UTF-8), which keeps a tenant's events in order"
        )
    return event, derived


def _opened(kind: str, body: dict[str, Any], keyring: Keyring | None) -> dict[str, Any]:
    """The body with its sealed fields opened (the cipher stage)."""
    sealed, event_id, tenant = body.pop("sealed"), body.get("id"), body.get("tenant")
    if not isinstance(sealed, dict) or sealed.get("alg") != ALGORITHM:
        raise SealedEventError(f"{kind} has a malformed `sealed` marker: {sealed!r}")
    key_id, names = sealed.get("key"), sealed.get("fields")
    if not isinstance(key_id, str) or not isinstance(names, list):
        raise SealedEventError(f"{kind} has a malformed `sealed` marker: {sealed!r}")
    if not isinstance(event_id, str) or not isinstance(tenant, str):
        raise SealedEventError(f"sealed {kind} must carry its `id` and `tenant` in clear")
    if keyring is None:
        raise SealedEventError(
            f"{kind} {event_id} is sealed under data key {key_id} and this reader has no "
            "keyring; read it through a Deployment (which follows the keys topic)"
        )
    key = keyring.lookup(tenant, key_id)  # DataKeyErasedError, UnknownDataKeyError
    for name in names:
        if not isinstance(name, str) or name not in body:
            raise SealedEventError(f"sealed {kind} lists field {name!r}, which it lacks")
        body[name] = open_field(key, event_id, name, body[name])
    return body


def _upcast(
    row: EventType[Any], name: str, body: dict[str, Any], version: object, newest: int
) -> dict[str, Any]:
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= newest:
        raise EventVersionError(name, newest, version)
    for upcast in row.upcasters[version - 1 :]:
        body = upcast(dict(body))
    return body


@dataclass(frozen=True, slots=True)
class _Field:
    """How one field of an event type is read: worked out once per type, not per payload."""

    name: str
    type: str
    decode: Callable[[object], object]
    required: bool  # no default: a payload (or the reader, for FILLED_BY_READER) must give it


_READING: dict[type, tuple[tuple[_Field, ...], frozenset[str]]] = {}


def _reading(event: type) -> tuple[tuple[_Field, ...], frozenset[str]]:
    """The fields of `event` as the decoder reads them, and every name a payload may hold."""
    known = _READING.get(event)
    if known is not None:
        return known
    read = tuple(
        _Field(
            f.name,
            str(f.type),
            TRANSCODINGS[str(f.type)].decode,
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(event)
    )
    _READING[event] = read, frozenset(f.name for f in read) | frozenset(ENVELOPE)
    return _READING[event]


def _fields(row: EventType[Any], body: dict[str, Any], context: DecodeContext) -> MemoryEvent:
    fields, known = _reading(row.event)
    if not body.keys() <= known:
        raise EventDecodeError(
            f"{row.name} has no field {sorted(set(body) - known)[0]!r}; its fields: "
            f"{', '.join(f.name for f in fields)} (docs/events.md)"
        )
    values: dict[str, Any] = {}
    for f in fields:
        if f.name in body:
            try:
                values[f.name] = f.decode(body[f.name])
            except _WrongType:
                raise EventDecodeError(
                    f"{row.name}.{f.name} has the wrong type: {body[f.name]!r} is no {f.type}"
                ) from None
            except ValueError as exc:
                raise EventDecodeError(f"{row.name}.{f.name} is invalid: {exc}") from None
        elif (default := context.default(f.name)) is not None:
            values[f.name] = default
        elif f.required:
            raise EventDecodeError(f"{row.name} lacks field {f.name!r}")
    try:
        return cast(MemoryEvent, row.event(**values))
    except ValueError as exc:  # the event's own checks (InvalidInputError among them)
        raise EventDecodeError(f"{row.name} is invalid: {exc}") from None
