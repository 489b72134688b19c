"""JSON Schemas of the memory events, generated from the registry and the codec.

One schema (draft 2020-12) per event type, in its current version: what a producer in any
language may write to the memory topic. A field with a default, and a field the reader fills
(`FILLED_BY_READER`), may be left out, and so may `id` and `version`. The checked-in files
(docs/events/) are written by `memstream schemas`; a test fails when they and the code drift.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from memstream.memory.cipher import ALGORITHM
from memstream.memory.codec import FILLED_BY_READER, TRANSCODINGS
from memstream.memory.events import REGISTRY, EventType

__all__ = ["event_schema", "schema_files"]

_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_SEALED = {
    "type": "string",
    "contentEncoding": "base64",
    "description": "when listed in `sealed.fields`: AES-256-GCM nonce, ciphertext and tag of "
    "the field's JSON value",
}


def event_schema(row: EventType[Any]) -> dict[str, Any]:
    fields = dataclasses.fields(row.event)
    properties: dict[str, Any] = {
        "type": {"const": row.name},
        "version": {"const": row.version},
        "id": {
            "type": "string",
            "format": "uuid",
            "description": "derived from the event's effect key (docs/events.md); left out, "
            "the worker derives it; given, it must be that one",
        },
    }
    if row.sealed:
        properties["sealed"] = {
            "type": "object",
            "description": "present when the content fields are encrypted (docs/erasure.md): "
            "the tenant's data key, the AEAD and which fields are sealed; left out, the "
            "content is plaintext",
            "properties": {
                "key": {"type": "string"},
                "alg": {"const": ALGORITHM},
                "fields": {"type": "array", "items": {"enum": list(row.sealed)}},
            },
            "required": ["key", "alg", "fields"],
            "additionalProperties": False,
        }
    required = ["type"]
    for f in fields:
        properties[f.name] = dict(TRANSCODINGS[str(f.type)].schema)
        if f.name in row.sealed:
            properties[f.name] = {"anyOf": [properties[f.name], _SEALED]}
        has_default = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        if not has_default and f.name not in FILLED_BY_READER:
            required.append(f.name)
    return {
        "$schema": _DIALECT,
        "$id": f"memstream/events/{row.name}.v{row.version}.schema.json",
        "title": f"{row.name} (version {row.version})",
        "description": " ".join((row.event.__doc__ or "").split()),
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def schema_files() -> dict[str, str]:
    """File name -> text of every event type's schema, as checked in."""
    return {
        f"{row.name}.v{row.version}.schema.json": json.dumps(
            event_schema(row), indent=2, ensure_ascii=False
        )
        + "\n"
        for row in REGISTRY.rows
    }
