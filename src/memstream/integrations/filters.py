"""LangGraph store filters on item values: exact matches and $eq $ne $gt $gte $lt $lte.

The semantics are InMemoryStore's (LangGraph's reference): a plain value matches by equality,
a nested mapping matches key by key, a list matches element by element; an operator mapping
compares the value at the key with each operator. Ordering operators compare numbers; a value
that is missing or not a number never matches them (InMemoryStore would raise instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstream.errors import InvalidInputError

__all__ = ["OPERATORS", "check_filter", "matches"]

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def check_filter(filter: Mapping[str, Any] | None) -> None:
    """Refuse a filter with an operator this store does not know, before anything is read."""
    for key, wanted in (filter or {}).items():
        if not isinstance(key, str):
            raise InvalidInputError(f"filter keys must be strings, got {key!r}")
        if isinstance(wanted, Mapping):
            unknown = [k for k in wanted if isinstance(k, str) and k.startswith("$")]
            unknown = [k for k in unknown if k not in OPERATORS]
            if unknown:
                raise InvalidInputError(
                    f"filter on {key!r} uses {unknown[0]!r}; the operators are {sorted(OPERATORS)}"
                )
            check_filter({k: v for k, v in wanted.items() if not k.startswith("$")})


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes every condition of `filter`."""
    return all(_compare(value.get(key), wanted) for key, wanted in (filter or {}).items())


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(actual, op, operand) for op, operand in wanted.items())
        return isinstance(actual, Mapping) and all(
            _compare(actual.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def _apply(actual: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(actual == operand)
    if operator == "$ne":
        return bool(actual != operand)
    try:
        left, right = float(actual), float(operand)
    except (TypeError, ValueError):
        return False
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right  # $lte: check_filter admits nothing else
