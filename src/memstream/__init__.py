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
    EventVersionError,
    ForbiddenError,
    ImportFileError,
    InfrastructureError,
    InvalidInputError,
    InvalidTenantError,
    KafkaUnavailableError,
    LimitExceededError,
    MemoryIdRetiredError,
    MemoryNotFoundError,
    MemstreamError,
    ModelProviderError,
    NotAuthenticatedError,
    NotProjectedError,
    RedisUnavailableError,
    ReplayError,
    StackError,
)
from memstream.memory.embeddings import Embedder
from memstream.memory.events import (
    MemoriesConsolidated,
    MemoryEvent,
    MemoryForgotten,
    MemorySaved,
    MessageRecorded,
    TurnRecorded,
    decode_event,
    encode_event,
    memories_of,
)
from memstream.memory.model import Memory, MemoryType, RecalledMemory
from memstream.memory.tenancy import validate_tenant

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "EffectRefusedError",
    "Embedder",
    "EmbeddingModelMismatchError",
    "EmbeddingProviderError",
    "EventDecodeError",
    "EventVersionError",
    "ForbiddenError",
    "ImportFileError",
    "InfrastructureError",
    "InvalidInputError",
    "InvalidTenantError",
    "KafkaUnavailableError",
    "LimitExceededError",
    "MemoriesConsolidated",
    "Memory",
    "MemoryEvent",
    "MemoryForgotten",
    "MemoryIdRetiredError",
    "MemoryNotFoundError",
    "MemorySaved",
    "MemoryType",
    "MemstreamError",
    "MessageRecorded",
    "ModelProviderError",
    "NotAuthenticatedError",
    "NotProjectedError",
    "RecalledMemory",
    "RedisUnavailableError",
    "ReplayError",
    "Settings",
    "StackError",
    "TurnRecorded",
    "__version__",
    "decode_event",
    "encode_event",
    "memories_of",
    "validate_tenant",
]
