"""Filtered, paged search of one tenant's memories: the read side of the HTTP API and MCP tools.

Recall (`projections.recall`) answers the agent's one question — the k memories most relevant
to a turn. An API search asks more: a mode (words, meaning, or both fused), filters on thread,
memory type and time, a page (`offset`, `limit`) and how many memories match in all. Every
filter here runs on the server inside the same FT.SEARCH queries, next to the tenant's TAG, so
the tenant boundary and the filters never depend on the text; the words are tokenised and
escaped as recall does (`query_terms`, `escape_term`).

- keyword: BM25 over content and date words, filtered; `total` counts every match.
- semantic: a KNN (ADHOC_BF, as recall) over the filtered memories, or with `max_distance` a
  VECTOR_RANGE query; `total` counts the filtered memories (every one has a distance) or
  those in range.
- hybrid: both, fused by reciprocal rank (`projections.fusion`), each list at least as deep as
  the page's end; `total` counts the filtered memories.
- no searchable words (empty text, only stopwords): the filtered memories, newest first.

A caller may add a predicate (`keep`) for what the index cannot filter; the search then reads
the best `POST_FILTER_DEPTH` candidates, keeps those that pass, and pages over them, so
`total` counts the kept candidates.

Scores are 0..1 and order results within one query: semantic 1 - cosine distance; hybrid the
fused score scaled as recall's; keyword and listings 1 / (1 + rank).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import redis

from memstream.errors import InvalidInputError
from memstream.memory.embeddings import Embedders
from memstream.memory.model import Memory, MemoryType, RecalledMemory
from memstream.memory.tenancy import validate_tenant
from memstream.projections.connection import search_pipelined
from memstream.projections.fusion import RRF_K, reciprocal_rank_fusion
from memstream.projections.live_model import LiveModel
from memstream.projections.recall import (
    CANDIDATES,
    MAX_RECALL_K,
    TenantFilter,
    escape_term,
    parse_reply,
    query_terms,
)
from memstream.projections.schema import Fields, Keyspace, from_hash

__all__ = ["POST_FILTER_DEPTH", "FilteredSearch", "SearchFilter", "SearchMode", "SearchPage"]

POST_FILTER_DEPTH = MAX_RECALL_K
_DISTANCE = "vector_distance"


class SearchMode(enum.StrEnum):
    SEMANTIC = "semantic"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


def _tags(field: str, values: Sequence[str], *, negate: bool = False) -> str:
    rendered = "|".join(escape_term(value) for value in values)
    return f"{'-' if negate else ''}@{field}:{{{rendered}}}"


def _thread_token(thread: str) -> str:
    return thread.encode("utf-8").hex()


def _bound(at: datetime | None, open_end: str) -> str:
    return open_end if at is None else repr(at.timestamp())


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which memories of one tenant a search may return; each part renders to a clause that
    the index evaluates. Empty parts filter nothing."""

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

    def render(self) -> str:
        clauses = [TenantFilter(self.tenant).render()]
        if self.threads:
            tokens = [_thread_token(t) for t in self.threads]
            clauses.append(_tags(Fields.THREAD_TAG, tokens))
        if self.not_threads:
            tokens = [_thread_token(t) for t in self.not_threads]
            clauses.append(_tags(Fields.THREAD_TAG, tokens, negate=True))
        if self.memory_types:
            clauses.append(_tags(Fields.MEMORY_TYPE, [t.value for t in self.memory_types]))
        if self.not_memory_types:
            values = [t.value for t in self.not_memory_types]
            clauses.append(_tags(Fields.MEMORY_TYPE, values, negate=True))
        if self.since is not None or self.until is not None:
            low, high = _bound(self.since, "-inf"), _bound(self.until, "+inf")
            clauses.append(f"@{Fields.TIMESTAMP}:[{low} {high}]")
        return " ".join(clauses)


@dataclass(frozen=True, slots=True)
class SearchPage:
    """One page of results, best first, and how many memories matched in all."""

    hits: tuple[RecalledMemory, ...]
    total: int


def _returned(extra: Sequence[str] = ()) -> list[str | int]:
    names = [*Fields.RETURNED, *extra]
    return ["RETURN", len(names), *names]


def _total(reply: object) -> int:
    if isinstance(reply, dict):
        return int(reply.get(b"total_results", reply.get("total_results")) or 0)
    if isinstance(reply, list) and reply:
        return int(reply[0])
    raise redis.ResponseError(f"unexpected FT.SEARCH reply: {reply!r:.200}")


def _ranked(hits: Sequence[tuple[str, dict[str, str]]], start: int) -> list[RecalledMemory]:
    return [
        RecalledMemory(from_hash(fields), 1.0 / (1 + start + rank))
        for rank, (_, fields) in enumerate(hits)
    ]


class FilteredSearch:
    """Searches one namespace's live projection (through recall's alias) with filters."""

    def __init__(
        self, client: redis.Redis, keyspace: Keyspace, embedders: Embedders, *, url: str = ""
    ) -> None:
        self._client = client
        self._index = keyspace.alias
        self._live = LiveModel(client, keyspace, embedders, url=url)
        self._url = url

    def check(self) -> None:
        """Fail now if this process cannot embed queries for the live generation's model."""
        self._live.current()

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
    ) -> SearchPage:
        if limit < 1 or offset < 0 or offset + limit > MAX_RECALL_K:
            raise InvalidInputError(
                f"offset + limit must stay within {MAX_RECALL_K} (limit at least 1, offset at "
                f"least 0); got offset {offset}, limit {limit}"
            )
        if max_distance is not None and mode != SearchMode.SEMANTIC:
            raise InvalidInputError("distance_threshold applies to the semantic mode only")
        # With a predicate the index cannot evaluate, page over the kept best candidates.
        start, count = (0, POST_FILTER_DEPTH) if keep is not None else (offset, limit)
        hits, total = self._window(where, text, mode, start, count, max_distance)
        if keep is None:
            return SearchPage(tuple(hits), total)
        kept = [hit for hit in hits if keep(hit.memory)]
        return SearchPage(tuple(kept[offset : offset + limit]), len(kept))

    def _window(
        self,
        where: SearchFilter,
        text: str,
        mode: SearchMode,
        start: int,
        count: int,
        max_distance: float | None,
    ) -> tuple[list[RecalledMemory], int]:
        filters = where.render()
        terms = query_terms(text)
        if not terms and (mode == SearchMode.KEYWORD or not text.strip()):
            listing = [
                "FT.SEARCH", self._index, filters, *_returned(),
                "SORTBY", Fields.TIMESTAMP, "DESC", "LIMIT", start, count, "DIALECT", 2,
            ]  # fmt: skip
            reply = self._run([listing])
            return (_ranked(_fields_of(reply[0]), start), _total(reply[0])) if reply else ([], 0)
        if mode == SearchMode.KEYWORD:
            reply = self._run([self._lexical(filters, terms, start, count)])
            return (_ranked(_fields_of(reply[0]), start), _total(reply[0])) if reply else ([], 0)
        if mode == SearchMode.SEMANTIC:
            counted = max_distance is None

            def semantic(vector: bytes) -> list[list[Any]]:
                if max_distance is None:
                    return [self._knn(filters, vector, start, count), self._count(filters)]
                return [self._in_range(filters, vector, max_distance, start, count)]

            replies = self._embedded(text, semantic)
            if not replies:
                return [], 0
            hits = [
                RecalledMemory(from_hash(fields), max(0.0, 1.0 - float(fields[_DISTANCE])))
                for _, fields in _fields_of(replies[0])
            ]
            return hits, _total(replies[1] if counted else replies[0])
        depth = min(max(start + count, CANDIDATES), MAX_RECALL_K)

        def hybrid(vector: bytes) -> list[list[Any]]:
            commands = [self._knn(filters, vector, 0, depth), self._count(filters)]
            if terms:
                commands.append(self._lexical(filters, terms, 0, depth))
            return commands

        replies = self._embedded(text, hybrid)
        if not replies:
            return [], 0
        rankings = [_fields_of(replies[0]), *(_fields_of(r) for r in replies[2:])]
        by_key = {key: fields for ranking in rankings for key, fields in ranking}
        fused = reciprocal_rank_fusion([[key for key, _ in r] for r in rankings], k=RRF_K)
        best = 2.0 / (RRF_K + 1)
        hits = [
            RecalledMemory(from_hash(by_key[key]), min(score / best, 1.0))
            for key, score in fused[start : start + count]
        ]
        return hits, _total(replies[1])

    def _lexical(self, filters: str, terms: Sequence[str], start: int, count: int) -> list[Any]:
        union = "|".join(escape_term(term) for term in terms)
        query = f"({filters}) (@{Fields.CONTENT}|{Fields.WHEN}:({union}))"
        return [
            "FT.SEARCH", self._index, query, "SCORER", "BM25", *_returned(),
            "LIMIT", start, count, "DIALECT", 2,
        ]  # fmt: skip

    def _knn(self, filters: str, vector: bytes, start: int, count: int) -> list[Any]:
        query = (
            f"({filters})=>[KNN {start + count} @{Fields.EMBEDDING} $vector "
            f"HYBRID_POLICY ADHOC_BF AS {_DISTANCE}]"
        )
        return [
            "FT.SEARCH", self._index, query, *_returned([_DISTANCE]),
            "SORTBY", _DISTANCE, "ASC", "LIMIT", start, count,
            "PARAMS", 2, "vector", vector, "DIALECT", 2,
        ]  # fmt: skip

    def _in_range(
        self, filters: str, vector: bytes, radius: float, start: int, count: int
    ) -> list[Any]:
        query = (
            f"({filters}) @{Fields.EMBEDDING}:[VECTOR_RANGE $radius $vector]"
            f"=>{{$YIELD_DISTANCE_AS: {_DISTANCE}}}"
        )
        return [
            "FT.SEARCH", self._index, query, *_returned([_DISTANCE]),
            "SORTBY", _DISTANCE, "ASC", "LIMIT", start, count,
            "PARAMS", 4, "radius", radius, "vector", vector, "DIALECT", 2,
        ]  # fmt: skip

    def _count(self, filters: str) -> list[Any]:
        return ["FT.SEARCH", self._index, filters, "LIMIT", 0, 0, "DIALECT", 2]

    def _run(self, commands: list[list[Any]]) -> list[object] | None:
        return search_pipelined(self._client, commands, url=self._url, doing="searching memories")

    def _embedded(
        self, text: str, commands: Callable[[bytes], list[list[Any]]]
    ) -> list[object] | None:
        """The replies of `commands`, given `text` embedded for the live generation's model."""
        _, replies = self._live.search(
            text,
            lambda vector: commands(np.asarray(vector, dtype=np.float32).tobytes()),
            doing="searching memories",
        )
        return replies


def _fields_of(reply: object) -> list[tuple[str, dict[str, str]]]:
    """(key, returned fields) of each hit of a raw FT.SEARCH reply, in rank order."""
    return [(key, hit.fields) for key, hit in parse_reply(reply)]
