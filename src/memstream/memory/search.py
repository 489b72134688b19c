"""An API search of one tenant's memories, as a port: what it may be filtered on, how it
ranks, and one page of what it found. The HTTP API and the MCP tools search through it; the
projection backend answers it (for Redis, `projections.search.FilteredSearch`)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memstream.errors import InvalidInputError
from memstream.memory.model import Memory, MemoryType, RecalledMemory
from memstream.memory.ports import MAX_RECALL_K
from memstream.memory.tenancy import validate_tenant

__all__ = ["MemorySearch", "SearchFilter", "SearchMode", "SearchPage", "check_k", "check_search"]


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which memories of one tenant a search may return; empty parts filter nothing."""

    tenant: str
    threads: tuple[str, ...] = ()
    not_threads: tuple[str, ...] = ()
    memory_types: tuple[MemoryType, ...] = ()
    not_memory_types: tuple[MemoryType, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        for thread in (*self.threads, *self.not_threads):
            if not thread:
                raise InvalidInputError("a session (thread) filter names an empty session id")

    def matches(self, memory: Memory) -> bool:
        """Whether a memory of the tenant passes (time bounds inclusive): what a backend that
        filters in process evaluates, and Redis's query (`render_filter`) says."""
        return (
            (not self.threads or memory.thread in self.threads)
            and memory.thread not in self.not_threads
            and (not self.memory_types or memory.memory_type in self.memory_types)
            and memory.memory_type not in self.not_memory_types
            and (self.since is None or memory.timestamp >= self.since)
            and (self.until is None or memory.timestamp <= self.until)
        )


class SearchMode(enum.StrEnum):
    SEMANTIC = "semantic"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


@dataclass(frozen=True, slots=True)
class SearchPage:
    """One page of results, best first, and how many memories matched in all."""

    hits: tuple[RecalledMemory, ...]
    total: int


class MemorySearch(Protocol):
    def search(
        self,
        where: SearchFilter,
        text: str,
        *,
        mode: SearchMode = SearchMode.HYBRID,
        limit: int = 10,
        offset: int = 0,
        max_distance: float | None = None,
        keep: Callable[[Memory], bool] | None = None,
        vector_weight: float | None = None,
        scorer: str | None = None,
    ) -> SearchPage:
        """One page (`offset`, `limit`) of the memories `where` lets through, best first for
        `text` in `mode` (hybrid: recall's ranking); `max_distance` bounds the semantic mode's
        cosine distance; `keep` drops what the backend cannot filter, before the page is cut;
        `vector_weight` sets the hybrid fusion's weight of meaning for this search (None: the
        configured MEMSTREAM_RECALL_VECTOR_WEIGHT; other modes ignore it); `scorer` names the
        keyword mode's text scorer, one of TEXT_SCORERS (None: BM25; a backend without
        RediSearch's scorers ranks by its own BM25)."""
        ...


def check_k(k: int) -> None:
    """Refuse a recall's k outside 1..MAX_RECALL_K, saying the range (InvalidInputError)."""
    if not 1 <= k <= MAX_RECALL_K:
        raise InvalidInputError(f"k must be between 1 and {MAX_RECALL_K}, got {k}")


# RediSearch's text scorers (FT.SEARCH ... SCORER), for the keyword mode.
TEXT_SCORERS = ("BM25", "BM25STD", "TFIDF", "TFIDF.DOCNORM", "DISMAX", "DOCSCORE", "HAMMING")


def check_search(
    mode: SearchMode,
    limit: int,
    offset: int,
    max_distance: float | None,
    scorer: str | None = None,
) -> None:
    """Refuse a page, a threshold or a scorer no backend answers, saying which
    (InvalidInputError)."""
    if scorer is not None and scorer not in TEXT_SCORERS:
        raise InvalidInputError(f"text scorer {scorer!r} is not one of {', '.join(TEXT_SCORERS)}")
    if limit < 1 or offset < 0 or offset + limit > MAX_RECALL_K:
        raise InvalidInputError(
            f"offset + limit must stay within {MAX_RECALL_K} (limit at least 1, offset at "
            f"least 0); got offset {offset}, limit {limit}"
        )
    if max_distance is not None and mode != SearchMode.SEMANTIC:
        raise InvalidInputError("distance_threshold applies to the semantic mode only")
