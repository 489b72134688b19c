"""Filtered, paged search of one tenant's memories: the read side of the HTTP API and MCP tools.

Recall (`projections.recall`) answers the agent's one question — the k memories most relevant
to a turn. An API search asks more: a mode (words, meaning, or both fused), filters on thread,
memory type and time (`SearchFilter`), a page (`offset`, `limit`) and how many memories match
in all. Every filter runs on the server inside the FT.SEARCH queries, next to the tenant's TAG,
so the tenant boundary and the filters never depend on the text; the words are tokenised and
escaped as recall does (`query_terms`, `escape_term`).

- keyword: BM25 over content and date words, filtered; `total` counts every match.
- semantic: a KNN (ADHOC_BF, as recall) over the filtered memories, or with `max_distance` a
  VECTOR_RANGE query; `total` counts the filtered memories (every one has a distance) or
  those in range.
- hybrid (the default): recall itself (`RedisRecaller.search`, the middleware's ranking: the
  tenant's BM25 and the cosine fused by score, importance and recency, near-duplicates
  collapsed) over the candidates that pass the filters, asked for the page's end; `total`
  counts the filtered memories.
- no searchable words (empty text, only stopwords): the filtered memories, newest first.

A caller may add a predicate (`keep`) for what the index cannot filter; the search then reads
the best `POST_FILTER_DEPTH` candidates, keeps those that pass (hybrid: before ranking them),
and pages over them, so `total` counts the kept candidates.

Scores are 0..1 and order results within one query: semantic 1 - cosine distance; hybrid
recall's fused score; keyword and listings 1 / (1 + rank).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis

from memstream.memory.embeddings import Vectors
from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.ranking.tokens import query_terms
from memstream.memory.search import SearchFilter, SearchMode, SearchPage, check_search
from memstream.projections.connection import search_pipelined
from memstream.projections.recall import (
    MAX_RECALL_K,
    HybridQuery,
    RedisRecaller,
    escape_term,
    parse_reply,
    render_filter,
)
from memstream.projections.schema import Fields, Keyspace, from_hash, query_blob

__all__ = ["POST_FILTER_DEPTH", "FilteredSearch"]

POST_FILTER_DEPTH = MAX_RECALL_K
_DISTANCE = "vector_distance"


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
    """Searches one namespace's live projection (through recall's alias) with filters; the
    hybrid mode is `recaller`'s recall, which also embeds every query."""

    def __init__(
        self, client: redis.Redis, keyspace: Keyspace, recaller: RedisRecaller, *, url: str = ""
    ) -> None:
        self._client = client
        self._index = keyspace.alias
        self._recaller = recaller
        self._url = url

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
        check_search(mode, limit, offset, max_distance, scorer)
        terms = query_terms(text)
        if mode == SearchMode.HYBRID and (terms or text.strip()):
            return self._recalled(where, text, limit, offset, keep, vector_weight)
        # With a predicate the index cannot evaluate, page over the kept best candidates.
        start, count = (0, POST_FILTER_DEPTH) if keep is not None else (offset, limit)
        hits, total = self._window(
            where, terms, text, mode, start, count, max_distance, scorer or "BM25"
        )
        if keep is None:
            return SearchPage(tuple(hits), total)
        kept = [hit for hit in hits if keep(hit.memory)]
        return SearchPage(tuple(kept[offset : offset + limit]), len(kept))

    def _recalled(
        self,
        where: SearchFilter,
        text: str,
        limit: int,
        offset: int,
        keep: Callable[[Memory], bool] | None,
        vector_weight: float | None,
    ) -> SearchPage:
        tuning = None  # the recaller's own
        if vector_weight is not None:
            tuning = self._recaller.tuning.blended(vector_weight)

        def query(vector: Vectors) -> HybridQuery:
            k = POST_FILTER_DEPTH if keep is not None else offset + limit
            return HybridQuery(where.tenant, text, vector, k, where=where)

        if keep is not None:
            hits = self._recaller.recall_query(text, query, keep=keep, tuning=tuning)
            return SearchPage(tuple(hits[offset : offset + limit]), len(hits))
        # Counted in the recall's round trip, before its searches: a memory the worker writes
        # in between is then in the hits alone, never in the count alone (a total of 1 beside
        # no memories, which a client polling on `total` read as found), and the hits raise
        # the total to match.
        hits, total = self._recaller.recall_counted(text, query, render_filter(where), tuning)
        return SearchPage(tuple(hits[offset : offset + limit]), max(total, len(hits)))

    def _window(
        self,
        where: SearchFilter,
        terms: Sequence[str],
        text: str,
        mode: SearchMode,
        start: int,
        count: int,
        max_distance: float | None,
        scorer: str,
    ) -> tuple[list[RecalledMemory], int]:
        filters = render_filter(where)
        if not terms and (mode == SearchMode.KEYWORD or not text.strip()):
            listing = [
                "FT.SEARCH", self._index, filters, *_returned(),
                "SORTBY", Fields.TIMESTAMP, "DESC", "LIMIT", start, count, "DIALECT", 2,
            ]  # fmt: skip
            reply = self._run([listing])
            return (_ranked(_fields_of(reply[0]), start), _total(reply[0])) if reply else ([], 0)
        if mode == SearchMode.KEYWORD:
            reply = self._run([self._lexical(filters, terms, start, count, scorer)])
            return (_ranked(_fields_of(reply[0]), start), _total(reply[0])) if reply else ([], 0)
        counted = max_distance is None

        def semantic(vector: Vectors) -> list[list[Any]]:
            blob = query_blob(vector)
            if max_distance is None:
                return [self._knn(filters, blob, start, count), self._count(filters)]
            return [self._in_range(filters, blob, max_distance, start, count)]

        _, replies = self._recaller.embedded(text, semantic, doing="searching memories")
        if not replies:
            return [], 0
        hits = [
            RecalledMemory(from_hash(fields), max(0.0, 1.0 - float(fields[_DISTANCE])))
            for _, fields in _fields_of(replies[0])
        ]
        return hits, _total(replies[1] if counted else replies[0])

    def _lexical(
        self, filters: str, terms: Sequence[str], start: int, count: int, scorer: str
    ) -> list[Any]:
        union = "|".join(escape_term(term) for term in terms)
        query = f"({filters}) (@{Fields.CONTENT}|{Fields.WHEN}:({union}))"
        return [
            "FT.SEARCH", self._index, query, "SCORER", scorer, *_returned(),
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


def _fields_of(reply: object) -> list[tuple[str, dict[str, str]]]:
    """(key, returned fields) of each hit of a raw FT.SEARCH reply, in rank order."""
    return [(key, hit.fields) for key, hit in parse_reply(reply)]
