"""SemanticMemoryMiddleware: tenant store resolution, recall before a turn, record after it."""

from memstream.hooks.middleware import (
    ConsolidateConfig,
    RecallConfig,
    RecordConfig,
    SemanticMemoryMiddleware,
)
from memstream.hooks.tenants import StoreResolver

__all__ = [
    "ConsolidateConfig",
    "RecallConfig",
    "RecordConfig",
    "SemanticMemoryMiddleware",
    "StoreResolver",
]
