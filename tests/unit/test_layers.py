"""Dependencies run one way: the import graph of the package, read from the source.

Every part of the package (a top-level module or subpackage of memstream, and the package's
own `__init__`, the public API) has a row in `MAY_IMPORT`, the layers docs/architecture.md
draws; a part without one fails, so a new part is placed before it lands. No two parts import
each other, directly or round a cycle. Only the projection backend (and the commands that
start local processes) knows Redis.

The benches are a distribution of their own (memstream-bench, `bench/src/memstream_bench`): the
product imports nothing of theirs, and they use the product below its commands.

Every import form counts: `import memstream.x`, `from memstream.x import y`, `from memstream
import x` (a submodule, a name the package loads lazily, or the package itself), relative
imports, imports inside functions and under TYPE_CHECKING, and a module named to
`import_module`. A lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
PACKAGE = CHECKOUT / "src" / "memstream"
BENCH_PACKAGE = CHECKOUT / "bench" / "src" / "memstream_bench"

_ENTRY = {"memstream", "cli", "server", "integrations", "__main__"}
_ADAPTERS = {"eventsourced", "hooks", "streams", "projections", "providers", "agent"}
_BASE = {
    "memory", "errors", "llm", "config", "metrics", "health", "processes", "binaries", "topology",
}  # fmt: skip

# part -> the parts it may import. Dependencies point down: entry points, then operations,
# then the composition root, then the adapters, then the domain and the leaves.
MAY_IMPORT: dict[str, set[str]] = {
    "__main__": {"cli"},
    "cli": (_ENTRY - {"__main__", "cli"}) | {"operations", "deployment"} | _ADAPTERS | _BASE,
    "server": {"memstream", "operations", "deployment", "streams", "projections"} | _BASE,
    "integrations": {"memstream", "operations", "deployment", "hooks", "streams"} | _BASE,
    # The pytest plugin for users' suites: it starts a stack as the stack commands do, or
    # projects events in process into an in-memory deployment (a backend's writer).
    "testing": {"cli", "server", "operations", "deployment", "backends", "streams", "projections"}
    | _BASE,
    # The public API: the package's __init__, which loads some of its names lazily.
    "memstream": {"deployment", "eventsourced", "hooks", "memory", "config", "errors"},
    "operations": {"deployment", "streams"} | _BASE,
    "deployment": {"backends"} | _ADAPTERS | _BASE,
    # The projection backend's type and the registry that imports the one chosen.
    "backends": {"projections", "inmemory", "agent", "memory", "config", "errors"},
    "eventsourced": {"streams", "memory", "errors", "config", "metrics"},
    "hooks": {"agent", "memory", "errors", "llm"},
    "streams": {"memory", "errors", "llm", "config", "metrics"},
    # The agent runtime's durable journal is kept in the projection's Redis.
    "projections": {"memory", "agent", "errors", "config"},
    # The in-memory projection backend (tests, embedding): the domain only, no Redis.
    "inmemory": {"memory", "agent", "errors", "config"},
    # binaries: the cache folder a model from the hub is downloaded into (model_files);
    # processes: a free port for the local chat model's server (local_chat).
    "providers": {"memory", "errors", "llm", "config", "binaries", "processes"},
    "agent": {"errors", "llm"},  # the agent runtime knows nothing of memory
    "health": {"memory", "errors"},
    "metrics": {"memory", "errors"},
    "config": {"memory", "errors", "topology"},
    # Where `memstream up` put the local stack's brokers and Redis: config reads it.
    "topology": {"errors", "processes"},
    "processes": {"errors"},
    "binaries": {"errors", "processes"},  # the local stack's files and downloads
    "memory": {"errors", "llm"},  # the domain imports no runtime and no adapter
    "llm": {"errors"},
    "errors": set(),
}

# Above the composition root, only these modules import from projections/: the stack commands
# start and secure the local Redis.
PROJECTION_USERS_ABOVE = {
    "memstream.cli.stack": {"memstream.projections.connection"},
    # The pytest plugin asks whether the Redis it may start answers, as the stack commands do.
    "memstream.testing.local": {"memstream.projections.connection"},
    "memstream.testing.containers": {"memstream.projections.connection"},
}

# Who may import the Redis driver: the Redis projection backend's package, nothing else (the
# stack commands ask it whether Redis answers; the benches, a distribution of their own,
# measure against raw Redis from one module of theirs: BENCH_REDIS_IMPORTERS).
REDIS_IMPORTERS = ("memstream.projections",)
_REDIS = ("redis", "redisvl")

# The benches measure memstream's parts (the projection, the streams, the server's parts) against
# raw Kafka and Redis, so they reach below the composition root; they run no command of the
# product and start no stack through the pytest plugin.
BENCH_MAY_NOT_IMPORT = {"cli", "testing", "__main__"}
# The one module of the benches that talks to Redis bare: their raw baselines.
BENCH_REDIS_IMPORTERS = ("memstream_bench.raw_redis",)


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    found = {}
    for path in package.rglob("*.py"):
        relative = path.relative_to(package.parent).with_suffix("")
        found[".".join(p for p in relative.parts if p != "__init__")] = path
    return found


def _part(module: str) -> str:
    """The part a module belongs to: `memstream.memory.events` -> `memory`; the package's
    own `__init__` is `memstream`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "memstream"


def imported(
    source: str, module: str, *, package: bool, known: Mapping[str, object]
) -> Iterator[str]:
    """Every module `source` (the text of `module`) imports, absolute, in every form.

    `from P import x` names the submodule P.x where there is one (in `known`), else P.
    """
    tree = ast.parse(source)
    loads_by_name = any(
        isinstance(node, ast.Name | ast.alias)
        and (getattr(node, "id", None) or getattr(node, "name", None)) == "import_module"
        for node in ast.walk(tree)
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source_module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source_module = node.module or ""
            for alias in node.names:
                sub = f"{source_module}.{alias.name}"
                yield sub if sub in known else source_module
        elif (
            loads_by_name
            and isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in known
        ):
            yield node.value  # a module loaded by name (the package's lazy names)


def _graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> every module it imports (memstream's and others')."""
    modules = _modules(package)
    known = {**_modules(PACKAGE), **modules}
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        source = path.read_text(encoding="utf-8")
        is_package = path.name == "__init__.py"
        graph[module] |= set(imported(source, module, package=is_package, known=known))
    return graph


def _ours(names: set[str]) -> set[str]:
    return {n for n in names if n == "memstream" or n.startswith("memstream.")}


def _part_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    parts: dict[str, set[str]] = defaultdict(set)
    for module, names in graph.items():
        for other in _ours(names):
            if _part(other) != _part(module):
                parts[_part(module)].add(_part(other))
    return parts


def find_cycle(parts: Mapping[str, set[str]]) -> list[str] | None:
    """A cycle of parts, as the path round it, or None."""
    visiting: list[str] = []
    done: set[str] = set()

    def visit(part: str) -> list[str] | None:
        if part in visiting:
            return [*visiting[visiting.index(part) :], part]
        if part in done:
            return None
        visiting.append(part)
        for other in sorted(parts.get(part, ())):
            cycle = visit(other)
            if cycle is not None:
                return cycle
        visiting.pop()
        done.add(part)
        return None

    for part in sorted(parts):
        cycle = visit(part)
        if cycle is not None:
            return cycle
    return None


def test_every_part_is_placed_in_the_layers() -> None:
    parts = {_part(module) for module in _modules()}
    assert parts - MAY_IMPORT.keys() == set(), "give each new part its row in MAY_IMPORT"


def test_a_part_imports_only_what_is_below_it() -> None:
    graph = _graph()
    offenders = sorted(
        f"{module} imports {other}"
        for module, names in graph.items()
        for other in _ours(names)
        if _part(other) != _part(module) and _part(other) not in MAY_IMPORT[_part(module)]
    )
    assert offenders == []


def test_no_two_parts_import_each_other_even_round_a_cycle() -> None:
    cycle = find_cycle(_part_graph(_graph()))
    assert cycle is None, " -> ".join(cycle or [])


def test_above_the_composition_root_only_named_modules_reach_into_projections() -> None:
    above = {"cli", "server", "integrations", "operations", "health", "memstream", "__main__"}
    above |= {"testing"}
    offenders = sorted(
        f"{module} imports {other}"
        for module, names in _graph().items()
        if _part(module) in above
        for other in _ours(names)
        if _part(other) == "projections" and other not in PROJECTION_USERS_ABOVE.get(module, set())
    )
    assert offenders == []


def test_only_the_redis_backend_package_imports_redis() -> None:
    offenders = sorted(
        f"{module} imports {name}"
        for module, names in _graph().items()
        if not module.startswith(REDIS_IMPORTERS)
        for name in names
        if name.split(".")[0] in _REDIS
    )
    assert offenders == []


def test_the_product_has_no_bench_code() -> None:
    benches = [m for m in _modules() if "bench" in m.split(".") or m.endswith(".baselines")]
    assert benches == []


def test_the_product_imports_nothing_of_the_benches() -> None:
    offenders = sorted(
        f"{module} imports {name}"
        for module, names in _graph().items()
        for name in names
        if name.split(".")[0] == "memstream_bench"
    )
    assert offenders == []


def test_the_benches_use_the_product_below_its_commands() -> None:
    graph = _graph(BENCH_PACKAGE)
    assert "memstream.projections.connection" in graph["memstream_bench.raw_redis"]
    offenders = sorted(
        f"{module} imports {other}"
        for module, names in graph.items()
        for other in _ours(names)
        if _part(other) in BENCH_MAY_NOT_IMPORT
    )
    assert offenders == []


def test_only_the_benches_raw_baselines_import_redis() -> None:
    offenders = sorted(
        f"{module} imports {name}"
        for module, names in _graph(BENCH_PACKAGE).items()
        if not module.startswith(BENCH_REDIS_IMPORTERS)
        for name in names
        if name.split(".")[0] in _REDIS
    )
    assert offenders == []


def test_only_the_admin_module_makes_kafkas_admin_client() -> None:
    """aiokafka's admin client sends to a random broker: a dead one fails the request.
    `streams.admin.KafkaAdmin` is the one way in, which rides out a lost broker."""
    offenders = sorted(
        module
        for module, path in _modules().items()
        if module != "memstream.streams.admin"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) or getattr(node.func, "attr", None))
        == "AIOKafkaAdminClient"
    )
    assert offenders == []


# -- the guard's guards: the reader sees each import form, and the checks catch what they must


def _read(source: str, module: str = "memstream.server.app", *, package: bool = False) -> set[str]:
    known = {"memstream", "memstream.deployment", "memstream.server", "memstream.server.keys"}
    return set(imported(source, module, package=package, known=dict.fromkeys(known)))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import memstream.deployment", {"memstream.deployment"}),
        ("from memstream.deployment import Deployment", {"memstream.deployment"}),
        ("from memstream import __version__", {"memstream"}),
        ("from memstream import deployment", {"memstream.deployment"}),
        ("from . import keys", {"memstream.server.keys"}),
        ("from .keys import ApiKeys", {"memstream.server.keys"}),
        ("from .. import deployment", {"memstream.deployment"}),
        ("def f():\n    from memstream.deployment import Deployment", {"memstream.deployment"}),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from memstream.deployment import Deployment",
            {"typing", "memstream.deployment"},
        ),
        (
            "from importlib import import_module\n_LAZY = {'Deployment': 'memstream.deployment'}",
            {"importlib", "memstream.deployment"},
        ),
    ],
)
def test_the_reader_sees_every_import_form(source: str, expected: set[str]) -> None:
    assert _read(source) == expected


def test_relative_imports_in_a_package_init_resolve_from_the_package() -> None:
    assert _read("from .keys import ApiKeys", "memstream.server", package=True) == {
        "memstream.server.keys"
    }


def test_the_cycle_through_the_public_api_is_caught() -> None:
    # The shape this test once missed: the server imports the package's __init__ (for its
    # version), which loads the deployment, which built the server's parts.
    graph = {
        "memstream.server.app": {"memstream"},
        "memstream": {"memstream.deployment"},
        "memstream.deployment": {"memstream.server.keys"},
    }
    assert find_cycle(_part_graph(graph)) == ["deployment", "server", "memstream", "deployment"]


def test_the_graph_is_read_from_the_source() -> None:
    parts = _part_graph(_graph())
    assert {"memory", "agent"} <= parts["hooks"]
    assert "deployment" in parts["memstream"]  # the lazy names of the public API
    assert "projections" in parts["backends"]  # a module named to import_module
