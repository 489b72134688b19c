"""Dependencies run one way: the import graph of the package, read from the source.

`memory` (the domain) imports no runtime and no adapter; `agent` knows nothing of memory;
and no two parts import each other, directly or round a cycle. Imports inside functions
count: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "memstream"


def _part(module: str) -> str:
    """The part a module belongs to: `memstream.memory.events` -> `memory`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "memstream"


def _imports() -> dict[str, set[str]]:
    """module -> the memstream modules it imports."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(p for p in relative.parts if p != "__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            graph[module] |= {n for n in names if n.startswith("memstream.")}
    return graph


def _part_graph() -> dict[str, set[str]]:
    parts: dict[str, set[str]] = defaultdict(set)
    for module, imported in _imports().items():
        for other in imported:
            if _part(other) != _part(module):
                parts[_part(module)].add(_part(other))
    return parts


@pytest.mark.parametrize(
    ("part", "forbidden"),
    [
        (
            "memory",
            {"agent", "hooks", "streams", "projections", "providers", "eventsourced", "cli",
             "bench", "server", "integrations", "composition", "config", "metrics", "health"},
        ),
        ("agent", {"memory", "hooks", "streams", "projections", "eventsourced", "providers",
                   "metrics", "health"}),
        ("llm", {"agent", "memory", "providers"}),
        ("projections", {"streams", "hooks", "agent", "eventsourced", "cli", "bench"}),
        # The stream side and the stores reach the projection through memory.ports only.
        ("streams", {"projections", "providers", "hooks", "agent", "eventsourced", "cli", "bench"}),
        ("eventsourced", {"projections", "providers", "hooks", "agent", "cli", "bench"}),
        ("hooks", {"streams", "projections", "eventsourced", "providers", "cli", "bench",
                   "metrics", "health"}),
    ],
)  # fmt: skip
def test_a_part_imports_nothing_above_it(part: str, forbidden: set[str]) -> None:
    reached = _part_graph().get(part, set()) & forbidden
    offenders = sorted(
        f"{module} imports {other}"
        for module, imported in _imports().items()
        if _part(module) == part
        for other in imported
        if _part(other) in forbidden
    )
    assert not reached, offenders


def test_no_two_parts_import_each_other_even_round_a_cycle() -> None:
    graph = _part_graph()
    visiting: list[str] = []
    done: set[str] = set()

    def visit(part: str) -> None:
        if part in visiting:
            cycle = [*visiting[visiting.index(part) :], part]
            raise AssertionError(" -> ".join(cycle))
        if part in done:
            return
        visiting.append(part)
        for other in sorted(graph.get(part, ())):
            visit(other)
        visiting.pop()
        done.add(part)

    for part in sorted(graph):
        visit(part)


def test_the_graph_is_read_from_the_source() -> None:
    # A guard on the guard: the reader does see the imports it must forbid.
    assert "memory" in _part_graph()["hooks"] and "agent" in _part_graph()["hooks"]
