"""Guards on the package as a whole: the public API is pinned and each export resolves, every
module imports cleanly and says what it owns.

A change to PUBLIC is a change of the API: make it here on purpose (httpx keeps the same
guard, tests/test_exported_members.py)."""

import importlib
import pkgutil
import subprocess
import sys

import memstream
import memstream.hooks

PUBLIC = [
    "ConsolidateConfig",
    "ConsolidationRequested",
    "DecodeContext",
    "Deployment",
    "Embedder",
    "EventSourcedStores",
    "InProcessMemoryStore",
    "InProcessStores",
    "MemoriesConsolidated",
    "Memory",
    "MemoryEvent",
    "MemoryForgotten",
    "MemorySaved",
    "MemoryType",
    "MessageRecorded",
    "RecallConfig",
    "RecalledMemory",
    "RecordConfig",
    "SemanticMemoryMiddleware",
    "Settings",
    "TenantErased",
    "TurnCompleted",
    "__version__",
    "decode_event",
    "encode_event",
    "memories_of",
    "validate_tenant",
]


def test_memstream_exports_exactly_the_public_api() -> None:
    assert memstream.__all__ == PUBLIC
    assert dir(memstream) == sorted(PUBLIC)


def test_every_export_resolves_to_memstreams_own_object() -> None:
    for name in PUBLIC:
        value = getattr(memstream, name)
        if isinstance(value, type) or callable(value):
            assert value.__module__.startswith("memstream."), name
    assert memstream.SemanticMemoryMiddleware is memstream.hooks.SemanticMemoryMiddleware


def test_errors_live_in_memstream_errors_only() -> None:
    errors = importlib.import_module("memstream.errors")
    assert not set(errors.__all__) & set(PUBLIC)
    assert errors.MemstreamError.__module__ == "memstream.errors"


def test_the_hooks_package_exports_no_internals() -> None:
    assert memstream.hooks.__all__ == [
        "ConsolidateConfig",
        "RecallConfig",
        "RecordConfig",
        "SemanticMemoryMiddleware",
        "StoreResolver",
        "TurnRecorder",
    ]


def test_importing_memstream_loads_no_kafka_redis_or_agent_runtime() -> None:
    code = (
        "import sys, memstream; "
        "print(sorted(m for m in ('aiokafka', 'confluent_kafka', 'redis', 'redisvl', 'faust', "
        "'memstream.agent') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"


def test_exported_members_are_exactly_the_public_names() -> None:
    public = {name for name in vars(memstream) if not name.startswith("_")}
    modules = {name for name, value in vars(memstream).items() if type(value).__name__ == "module"}
    assert set(memstream.__all__) - {"__version__"} == public - modules


def test_every_module_imports() -> None:
    names = [m.name for m in pkgutil.walk_packages(memstream.__path__, "memstream.")]
    assert "memstream.streams.worker" in names
    for name in names:
        if name == "memstream.__main__":
            continue
        importlib.import_module(name)


def test_every_module_says_what_it_owns() -> None:
    for info in pkgutil.walk_packages(memstream.__path__, "memstream."):
        module = importlib.import_module(info.name) if info.name != "memstream.__main__" else None
        if module is not None:
            assert (module.__doc__ or "").strip(), f"{info.name} has no docstring"
