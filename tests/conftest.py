"""Every test's hypothesis profile (tests/fuzzing.py: derandomised in `make test`, random and
long in `make fuzz`), the `fuzz` mark `make fuzz` selects (every `@given` test is marked), and
the order test files are handed out in: the longest first."""

from __future__ import annotations

import pytest
from hypothesis import is_hypothesis_test

from . import fuzzing

__all__: list[str] = []

PROFILE = fuzzing.load_profile()

# The test files that take longest, longest first (each file's summed time in a `make test` run
# on 2 cores, 2026-12-04: 55 s down to 9 s; docs/operations.md, "First contact"). `make test`
# hands whole files to pytest-xdist's processes in collection order (`--dist loadfile
# --no-loadscope-reorder`), so these start first and the many short files fill in after them:
# no process begins a 40-second file while the others have nothing left to do.
LONGEST_FIRST = (
    "integration/test_bench.py",
    "integration/test_extraction.py",
    "integration/test_erasure.py",
    "integration/test_crash.py",
    "integration/test_server_openapi.py",
    "integration/test_security.py",
    "integration/test_shards.py",
    "integration/test_churn.py",
    "integration/test_wheel.py",
    "integration/test_server_input.py",
    "integration/test_model_switch.py",
    "integration/test_cli.py",
    "integration/test_rebuild.py",
    "integration/test_golden_logs.py",
    "integration/test_testing_plugin.py",
    "integration/test_metrics.py",
    "integration/test_dead_letters.py",
    "integration/test_working_memory.py",
    "integration/test_eventsourced_store.py",
    "integration/test_langgraph_store.py",
    "integration/test_langgraph_store_parity.py",
)
_RANK = {name: rank for rank, name in enumerate(LONGEST_FIRST)}


def pytest_report_header() -> str:
    return f"hypothesis profile: {PROFILE}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, pytest.Function) and is_hypothesis_test(item.obj):
            item.add_marker(pytest.mark.fuzz)
    # A stable sort: each file's tests keep their order, the other files theirs.
    items.sort(
        key=lambda item: _RANK.get(item.nodeid.split("::")[0].removeprefix("tests/"), len(_RANK))
    )
