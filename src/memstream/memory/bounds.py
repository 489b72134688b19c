"""Bounds on a tenant's memory and the order in which memories beyond them are evicted.

Eviction order (the architecture's decision): importance ascending, then timestamp ascending,
then id — the least important go first, the oldest among equals. The Redis projection keeps
the same order in a sorted set whose members `projections.schema.order_member` derives from
`eviction_key`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memstream.memory.model import Memory

__all__ = ["DEFAULT_MAX_MEMORIES", "Bounds", "eviction_key", "over_bounds"]

DEFAULT_MAX_MEMORIES = 10_000


@dataclass(frozen=True, slots=True)
class Bounds:
    """The most a tenant's store keeps: a count of memories (0: unbounded)."""

    max_memories: int = DEFAULT_MAX_MEMORIES


def eviction_key(memory: Memory) -> tuple[int, int, str]:
    # Importance at the projection's resolution (millionths), so both orders agree exactly.
    return (
        min(max(round(memory.importance * 1_000_000), 0), 1_000_000),
        max(round(memory.timestamp.timestamp() * 1_000_000), 0),
        memory.id,
    )


def over_bounds(memories: Iterable[Memory], bounds: Bounds) -> list[Memory]:
    """The memories to evict so that the rest fit `bounds`, first to go first."""
    ordered = sorted(memories, key=eviction_key)
    excess = len(ordered) - bounds.max_memories
    return ordered[:excess] if bounds.max_memories and excess > 0 else []
