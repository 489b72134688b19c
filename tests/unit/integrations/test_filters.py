"""Value filters of the LangGraph store, checked against LangGraph's InMemoryStore semantics."""

from __future__ import annotations

from typing import Any

import pytest

from memstream.errors import InvalidInputError
from memstream.integrations.filters import check_filter, matches

VALUE: dict[str, Any] = {"color": "red", "score": 4.5, "tags": ["a", "b"], "meta": {"k": 1}}


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"color": "red"}, True),
        ({"color": "blue"}, False),
        ({"color": {"$eq": "red"}}, True),
        ({"color": {"$ne": "red"}}, False),
        ({"score": {"$gt": 4.5}}, False),
        ({"score": {"$gte": 4.5}}, True),
        ({"score": {"$lt": 5}}, True),
        ({"score": {"$lte": 4.0}}, False),
        ({"score": {"$gt": 3, "$lt": 5}}, True),
        ({"tags": ["a", "b"]}, True),
        ({"tags": ["a"]}, False),
        ({"meta": {"k": 1}}, True),
        ({"meta": {"k": 2}}, False),
        ({"missing": {"$gt": 1}}, False),
        ({"color": {"$gt": 1}}, False),
        ({"color": "red", "score": {"$gte": 5}}, False),
        (None, True),
    ],
)
def test_matches(condition: dict[str, Any] | None, expected: bool) -> None:
    check_filter(condition)
    assert matches(VALUE, condition) is expected


def test_an_unknown_operator_is_refused_saying_which_exist() -> None:
    with pytest.raises(InvalidInputError, match=r"\$in.*\$eq"):
        check_filter({"color": {"$in": ["red"]}})
