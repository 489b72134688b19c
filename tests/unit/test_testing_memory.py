"""memstream.testing without services: the in-memory deployment (`memstream_memory`) and
`project`, as docs/integrations.md shows them, run as a user's suite (pytester)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def _example() -> str:
    section = DOCS.read_text(encoding="utf-8").split("### Without services", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, "docs/integrations.md lost its in-memory example"
    return found.group(1)


def test_the_documented_example_passes_as_a_users_suite(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_memory_example=_example())
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
