"""The projection's read side: recall a tenant's memories, synchronously, by words and meaning.

A recall sends its FT.SEARCH queries in one pipelined round trip; Redis finds the candidates
and counts the tenant's statistics, and the domain's ranking (`memory.ranking.rank`) scores
and fuses them:

- `LexicalQuery`: the memories holding any word of the text in `content` or `when`, unstemmed
  (`VERBATIM`). The user's text is cut into word tokens, stopwords are dropped, and every
  token is escaped, so the query is always a plain union of terms: nothing the user types can
  become a query operator, a field name or a wildcard. Redis only finds these candidates; their
  BM25 is computed over the tenant's own statistics (`memory.ranking.bm25` says why), from
  `TenantStatsQuery`'s counts sent in the same round trip. Names and dates, which dominate
  questions about past conversations, are matched exactly here.
- `VectorQuery`: a KNN over the memory vectors. HYBRID_POLICY ADHOC_BF scores every vector
  that passes the tenant filter by brute force instead of walking a graph and discarding other
  tenants' hits: a tenant is bounded (MEMSTREAM_MAX_MEMORIES) and usually a small part of a
  shared index, where an HNSW walk can time out (measured: a 1M-vector index with a filter
  matching one document took over 500 ms without it, 0.2 ms with it). The index is therefore
  FLAT (`schema.memory_index_schema`); earlier HNSW indexes answer the same query.

Both go to the alias of the live generation's index, so recall keeps answering while a
replay rebuilds the next generation and switches when that one is swapped in. Both are
filtered on the server to the tenant's TAG (`TenantFilter`), whose value is the hex
token of the tenant id, so isolation never depends on the text; a search may narrow them
further (a `memory.search.SearchFilter`: sessions, memory types, time, as `render_filter`
writes it), and the candidates that pass are ranked as any recall's. Redis 7.4 / search 2.10 has
no FT.HYBRID, so the fusion is client side. Both searches return the candidates' vectors, so
every candidate has its exact cosine and its exact BM25 whichever list found it; the fused list
is then re-weighted by importance and recency (`RecallTuning`) and near-duplicates collapse to
one slot (`memory.ranking.dedup`).

Every query is a frozen value that renders to the exact FT.SEARCH arguments; the unit tests
check those strings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import redis

from memstream.errors import InvalidInputError
from memstream.memory.embeddings import Embedders, Vectors
from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.ports import MAX_RECALL_K
from memstream.memory.ranking.fusion import RecallTuning
from memstream.memory.ranking.neighbours import WINDOW, Around
from memstream.memory.ranking.rank import CANDIDATES, VECTOR_CANDIDATES, TermStats, rank
from memstream.memory.ranking.tokens import query_terms
from memstream.memory.search import SearchFilter, check_k
from memstream.memory.tenancy import tenant_token, validate_tenant
from memstream.memory.validity import Succession
from memstream.projections.connection import ReadScript, search_pipelined, text
from memstream.projections.live_model import LiveModel
from memstream.projections.schema import (
    Fields,
    Keyspace,
    from_hash,
    lua,
    query_blob,
    vector_of,
)

__all__ = [
    "CANDIDATES",
    "MAX_RECALL_K",
    "VECTOR_CANDIDATES",
    "Hit",
    "HybridQuery",
    "LexicalQuery",
    "RedisRecaller",
    "TenantFilter",
    "TenantStatsQuery",
    "VectorQuery",
    "escape_term",
    "parse_reply",
    "render_filter",
]

_DISTANCE = "vector_distance"


def escape_term(term: str) -> str:
    """`term` with a backslash before every character that is not a letter or digit.

    Over-escaping is harmless to RediSearch, and it keeps any punctuation that a future
    tokeniser lets through from acting as syntax (`-` negation, `|` union, `*` prefix, ...).
    """
    return "".join(ch if ch.isalnum() else f"\\{ch}" for ch in term)


@dataclass(frozen=True, slots=True)
class TenantFilter:
    """The server-side filter to one tenant: its TAG, holding the tenant's hex token."""

    tenant: str

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)

    def render(self) -> str:
        return f"@{Fields.TENANT_TAG}:{{{tenant_token(self.tenant)}}}"


def _tags(field: str, values: Sequence[str], *, negate: bool = False) -> str:
    rendered = "|".join(escape_term(value) for value in values)
    return f"{'-' if negate else ''}@{field}:{{{rendered}}}"


def _thread_token(thread: str) -> str:
    return thread.encode("utf-8").hex()


def _bound(at: datetime | None, open_end: str) -> str:
    return open_end if at is None else repr(at.timestamp())


def render_filter(where: SearchFilter) -> str:
    """`where` as the clause the index evaluates, beside the tenant's TAG."""
    clauses = [TenantFilter(where.tenant).render()]
    if where.threads:
        clauses.append(_tags(Fields.THREAD_TAG, [_thread_token(t) for t in where.threads]))
    if where.not_threads:
        tokens = [_thread_token(t) for t in where.not_threads]
        clauses.append(_tags(Fields.THREAD_TAG, tokens, negate=True))
    if where.memory_types:
        clauses.append(_tags(Fields.MEMORY_TYPE, [t.value for t in where.memory_types]))
    if where.not_memory_types:
        values = [t.value for t in where.not_memory_types]
        clauses.append(_tags(Fields.MEMORY_TYPE, values, negate=True))
    if where.since is not None or where.until is not None:
        low, high = _bound(where.since, "-inf"), _bound(where.until, "+inf")
        clauses.append(f"@{Fields.TIMESTAMP}:[{low} {high}]")
    return " ".join(clauses)


def _scope(tenant: str, where: SearchFilter | None) -> str:
    """The clause a query's candidates must pass: `where`, or else the tenant's TAG alone."""
    if where is None:
        return TenantFilter(tenant).render()
    if where.tenant != tenant:
        raise InvalidInputError(
            f"a query for tenant {tenant!r} was given a filter for {where.tenant!r}"
        )
    return render_filter(where)


# The vector too: fusion needs the exact cosine of candidates the lexical list found, and
# deduplication compares candidates with each other.
_CANDIDATE_FIELDS = (*Fields.RETURNED, Fields.EMBEDDING)


def _returned_fields(extra: Sequence[str] = ()) -> list[str | int]:
    names = [*_CANDIDATE_FIELDS, *extra]
    return ["RETURN", len(names), *names]


@dataclass(frozen=True, slots=True)
class VectorQuery:
    """A tenant-scoped KNN over the memory vectors (those `where` lets through), best (smallest
    cosine distance) first."""

    tenant: str
    vector: Vectors
    k: int = 10
    where: SearchFilter | None = None

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        check_k(self.k)

    def render(self) -> str:
        return (
            f"({_scope(self.tenant, self.where)})=>[KNN {self.k} @{Fields.EMBEDDING} $vector "
            f"HYBRID_POLICY ADHOC_BF AS {_DISTANCE}]"
        )

    def command(self, index: str) -> list[str | int | bytes]:
        """The whole FT.SEARCH command; the vector travels as a parameter, never as text."""
        blob = query_blob(self.vector)
        return [
            "FT.SEARCH",
            index,
            self.render(),
            *_returned_fields([_DISTANCE]),
            "SORTBY",
            _DISTANCE,
            "ASC",
            "LIMIT",
            0,
            self.k,
            "PARAMS",
            2,
            "vector",
            blob,
            "DIALECT",
            2,
        ]


@dataclass(frozen=True, slots=True)
class LexicalQuery:
    """A tenant-scoped search for any of the words of `text` (in the memories `where` lets
    through), Redis's BM25 first."""

    tenant: str
    text: str
    k: int = 10
    where: SearchFilter | None = None

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        check_k(self.k)

    @property
    def terms(self) -> tuple[str, ...]:
        return query_terms(self.text)

    def render(self) -> str | None:
        """The query string, or None when `text` has no searchable word (only stopwords)."""
        return _words_query(_scope(self.tenant, self.where), self.terms)

    def command(self, index: str) -> list[str | int | bytes] | None:
        rendered = self.render()
        if rendered is None:
            return None
        # VERBATIM: the candidates hold the words themselves, as the BM25 computed over them
        # counts them (stemmed matches crowded exact ones out of a 50-deep list). Redis's own
        # BM25 orders the candidates; its index-wide idf is replaced afterwards.
        return [
            "FT.SEARCH",
            index,
            rendered,
            "VERBATIM",
            "SCORER",
            "BM25",
            *_returned_fields(),
            "LIMIT",
            0,
            self.k,
            "DIALECT",
            2,
        ]


def _words_query(scope: str, terms: Sequence[str]) -> str | None:
    if not terms:
        return None
    union = "|".join(escape_term(term) for term in terms)
    return f"({scope}) (@{Fields.CONTENT}|{Fields.WHEN}:({union}))"


def _count(index: str, query: str) -> list[str | int | bytes]:
    return ["FT.SEARCH", index, query, "VERBATIM", "LIMIT", 0, 0, "DIALECT", 2]


@dataclass(frozen=True, slots=True)
class TenantStatsQuery:
    """Counts for the tenant's BM25: its memories, and how many of them hold each term.

    Always over the whole tenant, whatever filter the candidates pass: a memory's score does
    not depend on which others a search lets through."""

    tenant: str
    terms: tuple[str, ...]

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)

    def commands(self, index: str) -> list[list[str | int | bytes]]:
        """The tenant's count first, then one count per term, in the order of `terms`."""
        scope = TenantFilter(self.tenant).render()
        counts = [_count(index, scope)]
        for term in self.terms:
            counts.append(_count(index, _words_query(scope, (term,)) or ""))
        return counts


def _depth(k: int, candidates: int) -> int:
    return min(max(k, candidates), MAX_RECALL_K)


@dataclass(frozen=True, slots=True)
class HybridQuery:
    """Words and meaning for one tenant, each list asked for its candidates, fused, cut to k.

    `where` narrows the candidates (session, memory type, time: the HTTP API's and the MCP
    tools' filters); the ranking of those that pass is recall's."""

    tenant: str
    text: str
    vector: Vectors
    k: int = 10
    candidates: int = CANDIDATES
    vector_candidates: int = VECTOR_CANDIDATES
    where: SearchFilter | None = None

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        check_k(self.k)
        if min(self.candidates, self.vector_candidates) < 1:
            raise InvalidInputError(
                "candidates must be at least 1, got "
                f"{self.candidates} (words) and {self.vector_candidates} (meaning)"
            )
        _scope(self.tenant, self.where)

    @property
    def depth(self) -> int:
        return _depth(self.k, self.candidates)

    @property
    def lexical(self) -> LexicalQuery:
        return LexicalQuery(self.tenant, self.text, self.depth, self.where)

    @property
    def semantic(self) -> VectorQuery:
        depth = _depth(self.k, self.vector_candidates)
        return VectorQuery(self.tenant, self.vector, depth, self.where)

    @property
    def stats(self) -> TenantStatsQuery:
        return TenantStatsQuery(self.tenant, self.lexical.terms)


class RedisRecaller:
    """Recall over the Redis projection; unknown tenants (and a missing index) recall nothing.

    Redis finds the candidates and counts the tenant's statistics; `memory.ranking.rank` ranks
    them, so `recall` (the middleware's) and `search` with filters (the HTTP API's and the MCP
    tools') rank alike. Its `score` is in 0..1 (`memory.ranking.fusion.fuse` defines it): it
    orders results and is not comparable across queries. `recall_vector` is the vector-only
    path, whose `score` is the cosine similarity. `tuning` holds the fusion weight, the
    importance and recency weights and the duplicate threshold (`Deployment.recall_tuning`).
    """

    def __init__(
        self,
        client: redis.Redis,
        keyspace: Keyspace,
        embedders: Embedders,
        *,
        tuning: RecallTuning,
        url: str = "",
    ) -> None:
        self._client = client
        self._keys = keyspace
        self._live = LiveModel(client, keyspace, embedders, url=url)
        self._neighbours = ReadScript(
            client, lua("neighbours.lua"), url=url, doing="reading thread neighbours"
        )
        self._successions = ReadScript(
            client, lua("succession.lua"), url=url, doing="reading until when facts held"
        )
        self._url = url
        self.tuning = tuning

    def check(self) -> None:
        """Fail now, not at a turn, if this process cannot embed queries for the live
        generation's model (ConfigurationError: which model, and what fixes it)."""
        self._live.current()

    def embedded(
        self, text: str, commands: Callable[[Vectors], Sequence[Sequence[Any]]], *, doing: str
    ) -> tuple[Vectors, list[object] | None]:
        """The replies of the search `commands(vector)` and the vector, `text` embedded for
        the model of the generation they ran on (projections.live_model): the one place a
        query is embedded, for recall and for the server's search alike."""
        return self._live.search(text, commands, doing=doing)

    def recall(self, tenant: str, text: str, k: int = 10) -> list[RecalledMemory]:
        return self.recall_query(text, lambda vector: HybridQuery(tenant, text, vector, k))

    def recall_query(
        self,
        text: str,
        query: Callable[[Vectors], HybridQuery],
        *,
        keep: Callable[[Memory], bool] | None = None,
        tuning: RecallTuning | None = None,
    ) -> list[RecalledMemory]:
        """`search` of `query(vector)`, with `text` embedded for the live generation's model,
        ranked with `tuning` (None: the recaller's)."""
        vector, replies = self.embedded(
            text, lambda v: self._commands(query(v)), doing="recalling memories"
        )
        return self._ranked(query(vector), replies, tuning or self.tuning, keep)

    def recall_counted(
        self,
        text: str,
        query: Callable[[Vectors], HybridQuery],
        counted: str,
        tuning: RecallTuning | None = None,
    ) -> tuple[list[RecalledMemory], int]:
        """`recall_query`, and how many memories pass the filter `counted`, counted in the same
        round trip ahead of the searches: a memory written in between is then in the hits
        and not the count, never the other way round."""

        def commands(vector: Vectors) -> list[list[Any]]:
            return [_count(self._keys.alias, counted), *self._commands(query(vector))]

        vector, replies = self.embedded(text, commands, doing="recalling memories")
        if replies is None:
            return [], 0
        ranked = self._ranked(query(vector), replies[1:], tuning or self.tuning, None)
        return ranked, _total(replies[0])

    def recall_vector(self, tenant: str, text: str, k: int = 10) -> list[RecalledMemory]:
        _, replies = self.embedded(
            text,
            lambda vector: [VectorQuery(tenant, vector, k).command(self._keys.alias)],
            doing="recalling memories",
        )
        return _by_distance(replies)

    def search(
        self,
        query: HybridQuery,
        tuning: RecallTuning | None = None,
        *,
        keep: Callable[[Memory], bool] | None = None,
    ) -> list[RecalledMemory]:
        """Both searches and the tenant's counts in one round trip, then ranked, for a query
        already embedded (for the live generation's model: the caller's concern).

        `tuning` overrides the recaller's for this call (the bench compares settings with it).
        `keep` drops candidates the index cannot filter (before they are ranked, as `where`
        does on the server).
        """
        query = replace(query, vector=self._live.cast(query.vector))
        return self._ranked(query, self._run(self._commands(query)), tuning or self.tuning, keep)

    def search_vector(self, query: VectorQuery) -> list[RecalledMemory]:
        query = replace(query, vector=self._live.cast(query.vector))
        return _by_distance(self._run([query.command(self._keys.alias)]))

    def _commands(self, query: HybridQuery) -> list[list[Any]]:
        commands = [query.semantic.command(self._keys.alias)]
        lexical = query.lexical.command(self._keys.alias)
        if lexical is not None:
            commands += [lexical, *query.stats.commands(self._keys.alias)]
        return commands

    def _ranked(
        self,
        query: HybridQuery,
        replies: list[object] | None,
        tuning: RecallTuning,
        keep: Callable[[Memory], bool] | None,
    ) -> list[RecalledMemory]:
        if replies is None:
            return []
        hits = {key: hit for reply in replies[:2] for key, hit in parse_reply(reply)}
        dims = len(query.vector)
        found = [(from_hash(hit.fields), vector_of(hit.blob, dims)) for hit in hits.values()]
        # Neighbours are read from the generation the candidates came from; those among the
        # candidates are not read again.
        keys = self._keys.holding(next(iter(hits))) if hits else self._keys
        held = {memory.id: (memory, vector) for memory, vector in found}
        if keep is not None:
            found = [(memory, vector) for memory, vector in found if keep(memory)]
        if not found:
            return []
        stats = None
        if len(replies) > 1:  # the word search ran, and the tenant's counts with it
            counts = replies[2:]
            stats = TermStats(_total(counts[0]), tuple(_total(reply) for reply in counts[1:]))
        return rank(
            [memory for memory, _ in found],
            np.stack([vector for _, vector in found]),
            query.vector,
            query.lexical.terms,
            stats,
            tuning,
            query.k,
            self._around(keys, query.tenant, query.where, keep, held, dims),
            self._succession(keys, query.tenant),
            text=query.text,
        )

    def _succession(self, keys: Keyspace, tenant: str) -> Succession:
        """Until when facts held, from the subject orders of `keys`' generation, in one call
        (succession.lua)."""

        def succession(facts: Sequence[Memory]) -> dict[str, datetime]:
            args: list[str | int | bytes] = [
                keys.tenant_memory_prefix(tenant),
                keys.orders_prefix(tenant),
                *(fact.id for fact in facts),
            ]
            found = self._successions.read(args)
            return {
                fact.id: datetime.fromtimestamp(float(until), UTC)
                for fact, until in zip(facts, found, strict=True)
                if until
            }

        return succession

    def _around(
        self,
        keys: Keyspace,
        tenant: str,
        where: SearchFilter | None,
        keep: Callable[[Memory], bool] | None,
        held: Mapping[str, tuple[Memory, Vectors]],
        dims: int,
    ) -> Around:
        """The hits' thread neighbours from the thread orders of `keys`' generation, in one
        call (neighbours.lua), those `held` (the candidates) taken from there; those the
        candidates' filters would not let through are left out."""

        def around(hits: Sequence[Memory], reach: int) -> dict[str, list[tuple[Memory, Vectors]]]:
            names = _CANDIDATE_FIELDS
            args: list[str | int | bytes] = [
                keys.tenant_memory_prefix(tenant),
                keys.orders_prefix(tenant),
                reach,
                len(hits),
                *(hit.id for hit in hits),
                len(names),
                *names,
                *held,
            ]
            rows = self._neighbours.read(args)
            found: dict[str, list[tuple[Memory, Vectors]]] = {}
            for hit, near in zip(hits, rows, strict=True):
                kept = []
                for values in near:
                    if len(values) == 1:  # a candidate: read already
                        memory, vector = held[text(values[0])]
                    else:
                        stored = {n: v for n, v in zip(names, values, strict=True) if v is not None}
                        if not stored:  # removed since its place was read
                            continue
                        row = _hit(stored.items())
                        memory, vector = from_hash(row.fields), vector_of(row.blob, dims)
                    if (
                        abs(memory.timestamp - hit.timestamp) <= WINDOW
                        and (where is None or where.matches(memory))
                        and (keep is None or keep(memory))
                    ):
                        kept.append((memory, vector))
                found[hit.id] = kept
            return found

        return around

    def _run(self, commands: list[list[Any]]) -> list[object] | None:
        return search_pipelined(self._client, commands, url=self._url, doing="recalling memories")


def _by_distance(replies: list[object] | None) -> list[RecalledMemory]:
    if replies is None:
        return []
    return [
        RecalledMemory(memory=from_hash(hit.fields), score=1.0 - float(hit.fields[_DISTANCE]))
        for _, hit in parse_reply(replies[0])
    ]


@dataclass(frozen=True, slots=True)
class Hit:
    """One FT.SEARCH hit: its returned fields as text, and its vector's bytes (empty if not
    returned; `schema.vector_of` reads them)."""

    fields: dict[str, str]
    blob: bytes


def parse_reply(reply: object) -> list[tuple[str, Hit]]:
    """(key, hit) of each hit of a raw FT.SEARCH reply, in rank order.

    redis-py 8 speaks RESP3 by default (a map per reply); RESP2 (a flat list) is read too, so
    a client configured either way works. The vector stays bytes; every other field is text.
    """
    if isinstance(reply, dict):
        return [
            (text(_get(hit, "id")), _hit((_get(hit, "extra_attributes") or {}).items()))
            for hit in _get(reply, "results") or []
        ]
    if not isinstance(reply, list) or not reply:
        raise redis.ResponseError(f"unexpected FT.SEARCH reply: {reply!r:.200}")
    hits = []
    for at in range(1, len(reply) - 1, 2):
        key, flat = reply[at], reply[at + 1]
        hits.append((text(key), _hit(zip(flat[::2], flat[1::2], strict=True))))
    return hits


def _hit(pairs: Iterable[tuple[Any, Any]]) -> Hit:
    # One pass over every returned field of every candidate: on recall's path, where decoding
    # replies was a third of the ranking's time.
    fields: dict[str, str] = {}
    blob = b""
    for raw_name, value in pairs:
        name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
        if name == Fields.EMBEDDING:
            blob = value if isinstance(value, bytes) else blob
        else:
            fields[name] = value.decode() if isinstance(value, bytes) else str(value)
    return Hit(fields, blob)


def _total(reply: object) -> int:
    """The hit count of a `LIMIT 0 0` FT.SEARCH reply (RESP3 map or RESP2 list)."""
    if isinstance(reply, dict):
        return int(_get(reply, "total_results") or 0)
    if isinstance(reply, list) and reply:
        return int(reply[0])
    raise redis.ResponseError(f"unexpected FT.SEARCH reply: {reply!r:.200}")


def _get(reply: dict[Any, Any], name: str) -> Any:
    return reply.get(name.encode(), reply.get(name))
