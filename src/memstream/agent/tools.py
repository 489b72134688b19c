"""Tools an agent offers its model, and the check of a call's arguments against their schema.

Arguments are validated before any wrap_tool_call sees the call: a call whose arguments do
not fit the schema never runs, and the model is told what was wrong. The validator covers the
JSON-schema subset tool definitions use (object, properties, required, additionalProperties,
string, integer, number, boolean, array with items, enum).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memstream.llm import ToolSpec

__all__ = ["Tool", "schema_errors"]


@dataclass(frozen=True, slots=True)
class Tool:
    """A callable the model may use. `idempotent`: running it twice with the same arguments
    does no more than once, so a crashed run may run it again on recovery."""

    spec: ToolSpec
    fn: Callable[..., str]
    idempotent: bool = False

    @property
    def name(self) -> str:
        return self.spec.name


_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
}


def schema_errors(value: Any, schema: Mapping[str, Any], path: str = "arguments") -> list[str]:
    """Every way `value` breaks `schema`, as readable sentences (empty: it fits)."""
    errors: list[str] = []
    expected = schema.get("type")
    if isinstance(expected, str) and expected in _TYPES:
        python_type = _TYPES[expected]
        wrong_bool = isinstance(value, bool) and expected in ("integer", "number")
        if not isinstance(value, python_type) or wrong_bool:
            return [f"{path} must be of type {expected}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path} must be one of {schema['enum']}, got {value!r}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{path}.{name} is required")
        for name, item in value.items():
            if name in properties:
                errors += schema_errors(item, properties[name], f"{path}.{name}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}.{name} is not a known argument")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{path}[{index}]")
    return errors
