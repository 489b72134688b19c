"""The public API is pinned: what `memstream` exports, and that each export resolves.

A change to the list is a change of the API: make it here on purpose (httpx keeps the same
guard, tests/test_exported_members.py)."""

from __future__ import annotations

import importlib
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
    "MemoriesConsolidated",
    "Memory",
    "MemoryEvent",
    "MemoryForgotten",
    "MemoryType",
    "MessageRecorded",
    "RecallConfig",
    "RecalledMemory",
    "RecordConfig",
    "SemanticMemoryMiddleware",
    "Settings",
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
