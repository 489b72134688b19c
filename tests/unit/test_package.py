"""Guards on the package as a whole: the public API is pinned and each export resolves, every
module imports cleanly and says what it owns.

A change to PUBLIC is a change of the API: make it here on purpose (httpx keeps the same
guard, tests/test_exported_members.py)."""

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

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


# The other modules users import, each pinned as the package is; every other module is
# internal, free to move in any release (docs/architecture.md, "The public API").
PUBLIC_MODULES = {
    "memstream.errors": [
        "ConfigurationError",
        "DataKeyErasedError",
        "EffectRefusedError",
        "EmbeddingProviderError",
        "EventDecodeError",
        "EventIdMismatchError",
        "EventKeyMismatchError",
        "EventUnusableError",
        "EventVersionError",
        "ExtractionOutputError",
        "ForbiddenError",
        "ImportFileError",
        "InfrastructureError",
        "InvalidInputError",
        "InvalidTenantError",
        "KafkaUnavailableError",
        "LimitExceededError",
        "MemoryIdRetiredError",
        "MemoryNotFoundError",
        "MemstreamError",
        "ModelProviderError",
        "ModelRefusedError",
        "NamespaceConflictError",
        "NamespaceNotFoundError",
        "NamespaceTenantError",
        "NotAuthenticatedError",
        "ProjectionLagError",
        "RedisLoadingError",
        "RedisUnavailableError",
        "ReplayError",
        "SealedEventError",
        "SessionNotFoundError",
        "StackError",
        "StaleSessionError",
        "SummaryViewNotFoundError",
        "TaskNotFoundError",
        "UnknownDataKeyError",
        "UnknownEventTypeError",
    ],
    "memstream.agent": [
        "Agent",
        "AgentMiddleware",
        "Ask",
        "AskingMiddleware",
        "Block",
        "Clock",
        "Fail",
        "Fatal",
        "Guardrails",
        "InMemoryJournal",
        "InMemoryThreadStore",
        "Journal",
        "Message",
        "ModelClient",
        "ModelRequest",
        "ModelResponse",
        "NeedsApproval",
        "OfflineEchoModel",
        "Proceed",
        "PromptSection",
        "Rule",
        "RunConfig",
        "RunContext",
        "RunRecord",
        "RunResult",
        "ScriptedModel",
        "Success",
        "SystemClock",
        "ThreadState",
        "ThreadStore",
        "Tool",
        "ToolCall",
        "ToolError",
        "ToolOutcome",
        "ToolSpec",
        "Turn",
        "Usage",
    ],
    "memstream.hooks": [
        "ConsolidateConfig",
        "RecallConfig",
        "RecordConfig",
        "SemanticMemoryMiddleware",
        "StoreResolver",
        "TurnRecorder",
    ],
    "memstream.integrations.langchain": ["MemstreamMiddleware", "MemstreamState", "with_memory"],
    "memstream.integrations.langgraph": ["MemstreamStore"],
    "memstream.testing": [
        "Images",
        "MemstreamStack",
        "aproject",
        "memory_deployment",
        "project",
        "wait_until_recallable",
    ],
}
ROOT = Path(__file__).resolve().parents[2]


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


def test_each_public_module_exports_exactly_its_pinned_names() -> None:
    for name, exported in PUBLIC_MODULES.items():
        assert importlib.import_module(name).__all__ == exported, name


def test_the_docs_examples_import_only_public_modules() -> None:
    # What a user copies from the README or the docs must keep working across releases.
    public = {"memstream", *PUBLIC_MODULES}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    imported: dict[str, set[str]] = {}
    for page in pages:
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S):
            for node in ast.walk(ast.parse(block)):
                modules = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                for module in modules:
                    if module.split(".")[0] == "memstream":
                        imported.setdefault(module, set()).add(page.name)
    assert "memstream.integrations.langchain" in imported  # the reader finds the examples
    assert {m: p for m, p in imported.items() if m not in public} == {}


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
    for name in memstream.__all__:  # the lazy ones too, whatever ran before in this process
        getattr(memstream, name)
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


def test_the_benches_are_released_with_the_memstream_they_measure() -> None:
    # memstream-bench drives memstream's internals: its release pins the one it was built with.
    import tomllib

    bench = tomllib.loads((ROOT / "bench" / "pyproject.toml").read_text())["project"]
    assert bench["version"] == memstream.__version__
    assert f"memstream=={memstream.__version__}" in bench["dependencies"]
