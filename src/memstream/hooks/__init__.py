"""SemanticMemoryMiddleware: tenant store resolution, recall before a turn, record after it."""

from memstream.hooks.middleware import ConsolidateConfig, SemanticMemoryMiddleware
from memstream.hooks.recorder import TurnRecorder
from memstream.hooks.tenants import StoreResolver
from memstream.hooks.turns import RecallConfig, RecordConfig

__all__ = [
    "ConsolidateConfig",
    "RecallConfig",
    "RecordConfig",
    "SemanticMemoryMiddleware",
    "StoreResolver",
    "TurnRecorder",
]
