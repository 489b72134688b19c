"""memstream: event-sourced long-term semantic memory for LLM agents.

Memory events go to Kafka keyed by tenant, a Faust worker projects them into a Redis vector
index, and recall reads that projection. Importing this package has no side effects.
"""

from memstream.config import Settings
from memstream.errors import (
    ConfigurationError,
    EffectRefusedError,
    EmbeddingModelMismatchError,
    EmbeddingProviderError,
    EventDecodeError,
    EventIdMismatchError,
    EventKeyMismatchError,
    EventVersionError,
    ImportFileError,
    InfrastructureError,
    InvalidInputError,
    InvalidTenantError,
    KafkaUnavailableError,
    MemstreamError,
    ModelProviderError,
    RedisUnavailableError,
    ReplayError,
    StackError,
    UnknownEventTypeError,
)
from memstream.memory.codec import DecodeContext, decode_event, encode_event
from memstream.memory.embeddings import Embedder
from memstream.memory.events import (
    ConsolidationRequested,
    MemoriesConsolidated,
    MemoryEvent,
    MemoryForgotten,
    MessageRecorded,
    TurnCompleted,
    memories_of,
)
from memstream.memory.model import Memory, MemoryType, RecalledMemory
from memstream.memory.tenancy import validate_tenant

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "ConsolidationRequested",
    "DecodeContext",
    "EffectRefusedError",
    "Embedder",
    "EmbeddingModelMismatchError",
    "EmbeddingProviderError",
    "EventDecodeError",
    "EventIdMismatchError",
    "EventKeyMismatchError",
    "EventVersionError",
    "ImportFileError",
    "InfrastructureError",
    "InvalidInputError",
    "InvalidTenantError",
    "KafkaUnavailableError",
    "MemoriesConsolidated",
    "Memory",
    "MemoryEvent",
    "MemoryForgotten",
    "MemoryType",
    "MemstreamError",
    "MessageRecorded",
    "ModelProviderError",
    "RecalledMemory",
    "RedisUnavailableError",
    "ReplayError",
    "Settings",
    "StackError",
    "TurnCompleted",
    "UnknownEventTypeError",
    "__version__",
    "decode_event",
    "encode_event",
    "memories_of",
    "validate_tenant",
]
