"""memstream: event-sourced long-term semantic memory for LLM agents.

Memory events go to Kafka keyed by tenant, a Faust worker projects them into a Redis vector
index, and recall reads that projection. Importing this package has no side effects: nothing
connects until a part is used.

The public API is what this module exports: the deployment and its settings, the memory
middleware and its configs, the stores, the domain's nouns and the events of the log (the
wire contract other producers write too). Errors are in `memstream.errors`; the agent
runtime is `memstream.agent`.
"""

import typing
from importlib import import_module as _import_module

from memstream.config import Settings
from memstream.memory.codec import DecodeContext, decode_event, encode_event
from memstream.memory.embeddings import Embedder
from memstream.memory.events import (
    ConsolidationRequested,
    MemoriesConsolidated,
    MemoryEvent,
    MemoryForgotten,
    MemorySaved,
    MessageRecorded,
    TenantErased,
    TurnCompleted,
    memories_of,
)
from memstream.memory.inprocess import InProcessMemoryStore, InProcessStores
from memstream.memory.model import Memory, MemoryType, RecalledMemory
from memstream.memory.tenancy import validate_tenant

if typing.TYPE_CHECKING:
    from memstream.deployment import Deployment
    from memstream.eventsourced import EventSourcedStores
    from memstream.hooks import (
        ConsolidateConfig,
        RecallConfig,
        RecordConfig,
        SemanticMemoryMiddleware,
    )

__version__ = "0.4.0"  # CHANGELOG.md; pyproject.toml reads it from here

# Loaded on first use: they bring in the Kafka, Redis and agent-runtime libraries, which a
# producer that only encodes events (or a `memstream --help`) never needs.
_LAZY = {
    "Deployment": "memstream.deployment",
    "EventSourcedStores": "memstream.eventsourced",
    "ConsolidateConfig": "memstream.hooks",
    "RecallConfig": "memstream.hooks",
    "RecordConfig": "memstream.hooks",
    "SemanticMemoryMiddleware": "memstream.hooks",
}


def __getattr__(name: str) -> typing.Any:
    if name in _LAZY:
        value = getattr(_import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'memstream' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
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
