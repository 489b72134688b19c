"""Every test's hypothesis profile (tests/fuzzing.py: derandomised in `make test`, random and
long in `make fuzz`), and the `fuzz` mark `make fuzz` selects: every `@given` test is marked."""

from __future__ import annotations

import pytest
from hypothesis import is_hypothesis_test

from . import fuzzing

__all__: list[str] = []

PROFILE = fuzzing.load_profile()


def pytest_report_header() -> str:
    return f"hypothesis profile: {PROFILE}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, pytest.Function) and is_hypothesis_test(item.obj):
            item.add_marker(pytest.mark.fuzz)
