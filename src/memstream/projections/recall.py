"""The projection's read side: recall a tenant's memories, synchronously, by words and meaning.

A recall sends its FT.SEARCH queries in one pipelined round trip, scores the candidates they
return, and fuses the scores (`projections.fusion`):

- `LexicalQuery`: the memories holding any word of the text in `content` or `when`, unstemmed
  (`VERBATIM`). The user's text is cut into word tokens, stopwords are dropped, and every
  token is escaped, so the query is always a plain union of terms: nothing the user types can
  become a query operator, a field name or a wildcard. Redis only finds these candidates; their
  BM25 is computed here over the tenant's own statistics (`projections.bm25` says why), from
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
token of the tenant id, so isolation never depends on the text. Redis 7.4 / search 2.10 has
no FT.HYBRID, so the fusion is client side. Both searches return the candidates' vectors, so
every candidate has its exact cosine and its exact BM25 whichever list found it; the fused list
is then re-weighted by importance and recency (`RecallTuning`) and near-duplicates collapse to
one slot (`projections.dedup`).

Every query is a frozen value that renders to the exact FT.SEARCH arguments; the unit tests
check those strings.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis

from memstream.errors import InvalidInputError
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.model import Memory, RecalledMemory
from memstream.memory.ports import MAX_RECALL_K
from memstream.memory.tenancy import tenant_token, validate_tenant
from memstream.projections.bm25 import idf, okapi
from memstream.projections.connection import search_pipelined, text
from memstream.projections.dedup import collapse_duplicates
from memstream.projections.fusion import Candidate, RecallTuning, fuse
from memstream.projections.schema import Fields, Keyspace, from_hash, when_text

__all__ = [
    "MAX_QUERY_TERMS",
    "MAX_RECALL_K",
    "STOPWORDS",
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
    "query_terms",
    "word_tokens",
]

MAX_QUERY_TERMS = 64
# Each list contributes this many candidates (at least k) to the fusion. Score fusion, unlike
# the rank fusion it replaced, is not hurt by depth; the lexical list must be deep enough that
# rescoring it with the tenant's BM25 finds what a full per-tenant BM25 ranks first: measured
# on the LoCoMo dev split, 50 candidates rescored equal the reference BM25 (docs/benchmarks.md).
CANDIDATES = 50
# The vector list can be shallower: every lexical candidate gets its exact cosine anyway, and
# on the dev split 20 and 50 vector candidates gave the same rankings (docs/benchmarks.md);
# its reply carries a vector per hit, so depth is what it costs.
VECTOR_CANDIDATES = 20

# RediSearch's default stopwords. They must go before the query is built: a union of
# stopwords only reduces to the tenant filter alone and would match every memory.
# RediSearch's default stopwords (the index drops them too), plus the pronouns, auxiliaries
# and question words that fill questions about the past ("what did I say about ...?"): left
# in, "I" or "did" matches most memories lexically and drowns the names and dates.
_STOPWORD_TEXT = (
    "a is the an and are as at be but by for if in into it no not of on or such that their "
    "then there these they this to was will with "
    "i me my mine myself we us our ours you your yours he him his she her hers its them "
    "what which who whom whose when where why how do does did done doing have has had "
    "having am were been being can could would should shall might must about from "
    "so up out just than too very s t don now all any both each few more most other some "
    "own same again also ever"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split(" "))

_WORD = re.compile(r"\w+", re.UNICODE)
_DISTANCE = "vector_distance"


def word_tokens(text: str) -> list[str]:
    """The lower-case word tokens of `text`, stopwords dropped, repeats kept, in order."""
    return [token for token in _WORD.findall(text.lower()) if token not in STOPWORDS]


def query_terms(text: str) -> tuple[str, ...]:
    """The distinct word tokens of `text` (see `word_tokens`), in order, capped."""
    return tuple(dict.fromkeys(word_tokens(text)))[:MAX_QUERY_TERMS]


def escape_term(term: str) -> str:
    """`term` with a backslash before every character that is not a letter or digit.

    Over-escaping is harmless to RediSearch, and it keeps any punctuation that a future
    tokeniser lets through from acting as syntax (`-` negation, `|` union, `*` prefix, ...).
    """
    return "".join(ch if ch.isalnum() else f"\\{ch}" for ch in term)


def _check_k(k: int) -> None:
    if not 1 <= k <= MAX_RECALL_K:
        raise InvalidInputError(f"k must be between 1 and {MAX_RECALL_K}, got {k}")


@dataclass(frozen=True, slots=True)
class TenantFilter:
    """The server-side filter to one tenant: its TAG, holding the tenant's hex token."""

    tenant: str

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)

    def render(self) -> str:
        return f"@{Fields.TENANT_TAG}:{{{tenant_token(self.tenant)}}}"


def _returned_fields(extra: Sequence[str] = ()) -> list[str | int]:
    # The vector too: fusion needs the exact cosine of candidates the lexical list found, and
    # deduplication compares candidates with each other.
    names = [*Fields.RETURNED, Fields.EMBEDDING, *extra]
    return ["RETURN", len(names), *names]


@dataclass(frozen=True, slots=True)
class VectorQuery:
    """A tenant-scoped KNN over the memory vectors, best (smallest cosine distance) first."""

    tenant: str
    vector: Vectors
    k: int = 10

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        _check_k(self.k)

    def render(self) -> str:
        return (
            f"({TenantFilter(self.tenant).render()})=>[KNN {self.k} @{Fields.EMBEDDING} $vector "
            f"HYBRID_POLICY ADHOC_BF AS {_DISTANCE}]"
        )

    def command(self, index: str) -> list[str | int | bytes]:
        """The whole FT.SEARCH command; the vector travels as a parameter, never as text."""
        blob = np.asarray(self.vector, dtype=np.float32).tobytes()
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
    """A tenant-scoped BM25 search for any of the words of `text`, best first."""

    tenant: str
    text: str
    k: int = 10

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        _check_k(self.k)

    @property
    def terms(self) -> tuple[str, ...]:
        return query_terms(self.text)

    def render(self) -> str | None:
        """The query string, or None when `text` has no searchable word (only stopwords)."""
        return _words_query(self.tenant, self.terms)

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


def _words_query(tenant: str, terms: Sequence[str]) -> str | None:
    if not terms:
        return None
    union = "|".join(escape_term(term) for term in terms)
    return f"({TenantFilter(tenant).render()}) (@{Fields.CONTENT}|{Fields.WHEN}:({union}))"


def _count(index: str, query: str) -> list[str | int | bytes]:
    return ["FT.SEARCH", index, query, "VERBATIM", "LIMIT", 0, 0, "DIALECT", 2]


@dataclass(frozen=True, slots=True)
class TenantStatsQuery:
    """Counts for the tenant's BM25: its memories, and how many of them hold each term."""

    tenant: str
    terms: tuple[str, ...]

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)

    def commands(self, index: str) -> list[list[str | int | bytes]]:
        """The tenant's count first, then one count per term, in the order of `terms`."""
        counts = [_count(index, TenantFilter(self.tenant).render())]
        for term in self.terms:
            counts.append(_count(index, _words_query(self.tenant, (term,)) or ""))
        return counts


def _depth(k: int, candidates: int) -> int:
    return min(max(k, candidates), MAX_RECALL_K)


@dataclass(frozen=True, slots=True)
class HybridQuery:
    """Words and meaning for one tenant, each list asked for its candidates, fused, cut to k."""

    tenant: str
    text: str
    vector: Vectors
    k: int = 10
    candidates: int = CANDIDATES
    vector_candidates: int = VECTOR_CANDIDATES

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        _check_k(self.k)
        if min(self.candidates, self.vector_candidates) < 1:
            raise InvalidInputError(
                "candidates must be at least 1, got "
                f"{self.candidates} (words) and {self.vector_candidates} (meaning)"
            )

    @property
    def depth(self) -> int:
        return _depth(self.k, self.candidates)

    @property
    def lexical(self) -> LexicalQuery:
        return LexicalQuery(self.tenant, self.text, self.depth)

    @property
    def semantic(self) -> VectorQuery:
        return VectorQuery(self.tenant, self.vector, _depth(self.k, self.vector_candidates))

    @property
    def stats(self) -> TenantStatsQuery:
        return TenantStatsQuery(self.tenant, self.lexical.terms)


class RedisRecaller:
    """Recall over the Redis projection; unknown tenants (and a missing index) recall nothing.

    `recall` is hybrid; its `score` is in 0..1 (`projections.fusion.fuse` defines it): it orders
    results and is not comparable across queries. `recall_vector` is the vector-only path,
    whose `score` is the cosine similarity. `tuning` holds the fusion weight, the importance and
    recency weights and the duplicate threshold (`Deployment.recall_tuning`); with
    `deduplicate=False` no memory is dropped for restating a better-ranked one (a key-value
    store's items are each their own, however alike their values: the LangGraph store).
    """

    def __init__(
        self,
        client: redis.Redis,
        keyspace: Keyspace,
        embedder: Embedder,
        *,
        tuning: RecallTuning,
        url: str = "",
        deduplicate: bool = True,
    ) -> None:
        self._client = client
        self._keys = keyspace
        self._embedder = embedder
        self._url = url
        self.tuning = tuning
        self._deduplicate = deduplicate

    def recall(self, tenant: str, text: str, k: int = 10) -> list[RecalledMemory]:
        return self.search(HybridQuery(tenant, text, self._embedder.embed_query(text), k))

    def recall_vector(self, tenant: str, text: str, k: int = 10) -> list[RecalledMemory]:
        return self.search_vector(VectorQuery(tenant, self._embedder.embed_query(text), k))

    def search(
        self, query: HybridQuery, tuning: RecallTuning | None = None
    ) -> list[RecalledMemory]:
        """Both searches and the tenant's counts in one round trip, scored, fused, deduplicated.

        `tuning` overrides the recaller's for this call (the bench compares settings with it).
        """
        tuning = tuning or self.tuning
        terms = query.lexical.terms
        commands = [query.semantic.command(self._keys.alias)]
        lexical = query.lexical.command(self._keys.alias)
        if lexical is not None:
            commands += [lexical, *query.stats.commands(self._keys.alias)]
        replies = self._run(commands)
        if replies is None:
            return []
        hits = {key: hit for reply in replies[:2] for key, hit in parse_reply(reply)}
        if not hits:
            return []
        # One matrix product gives every candidate's cosine, whichever list found it.
        keys = list(hits)
        vectors = np.stack([hits[key].vector for key in keys])
        cosines = vectors @ np.asarray(query.vector, dtype=np.float32)
        memories = [from_hash(hits[key].fields) for key in keys]
        bm25 = _tenant_bm25(terms, memories, replies[2:]) if lexical is not None else None
        candidates = [
            Candidate(
                memory,
                lexical=bm25[i] if bm25 is not None else 0.0,
                cosine=float(cosines[i]),
                vector=vectors[i],
            )
            for i, memory in enumerate(memories)
        ]
        fused = fuse(candidates, tuning)
        if not self._deduplicate:
            return [RecalledMemory(memory=c.memory, score=score) for c, score in fused[: query.k]]
        ranked = collapse_duplicates(fused, tuning.duplicate_similarity, query.k)
        return [RecalledMemory(memory=c.memory, score=score) for c, score in ranked]

    def search_vector(self, query: VectorQuery) -> list[RecalledMemory]:
        replies = self._run([query.command(self._keys.alias)])
        if replies is None:
            return []
        return [
            RecalledMemory(memory=from_hash(hit.fields), score=1.0 - float(hit.fields[_DISTANCE]))
            for _, hit in parse_reply(replies[0])
        ]

    def _run(self, commands: list[list[Any]]) -> list[object] | None:
        return search_pipelined(self._client, commands, url=self._url, doing="recalling memories")


def _tenant_bm25(
    terms: Sequence[str], memories: Sequence[Memory], counts: Sequence[object]
) -> list[float]:
    """BM25 of each memory over the tenant's statistics (`counts`: TenantStatsQuery's replies).

    The tenant's average memory length is not counted on the server (it would scan every
    memory of the tenant); the candidates' average stands in for it, which moved LoCoMo's
    recall by under half a point against the exact average.
    """
    documents = _total(counts[0])
    idfs = {
        term: idf(documents, _total(reply)) for term, reply in zip(terms, counts[1:], strict=True)
    }
    tokens = [Counter(word_tokens(f"{m.content} {when_text(m.timestamp)}")) for m in memories]
    lengths = [sum(c.values()) for c in tokens]
    average = sum(lengths) / len(lengths) if lengths else 0.0
    distinct = set(terms)
    return [okapi(distinct, c, n, idfs, average) for c, n in zip(tokens, lengths, strict=True)]


@dataclass(frozen=True, slots=True)
class Hit:
    """One FT.SEARCH hit: its returned fields as text, and its vector (empty if not returned)."""

    fields: dict[str, str]
    vector: Vectors


def parse_reply(reply: object) -> list[tuple[str, Hit]]:
    """(key, hit) of each hit of a raw FT.SEARCH reply, in rank order.

    redis-py 8 speaks RESP3 by default (a map per reply); RESP2 (a flat list) is read too, so
    a client configured either way works. The vector stays bytes; every other field is text.
    """
    if isinstance(reply, dict):
        return [
            (text(_get(hit, "id")), _hit(dict((_get(hit, "extra_attributes") or {}).items())))
            for hit in _get(reply, "results") or []
        ]
    if not isinstance(reply, list) or not reply:
        raise redis.ResponseError(f"unexpected FT.SEARCH reply: {reply!r:.200}")
    hits = []
    for at in range(1, len(reply) - 1, 2):
        key, flat = reply[at], reply[at + 1]
        hits.append((text(key), _hit({flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)})))
    return hits


def _hit(raw: dict[Any, Any]) -> Hit:
    fields = {text(name): value for name, value in raw.items()}
    blob = fields.pop(Fields.EMBEDDING, b"")
    vector = np.frombuffer(blob if isinstance(blob, bytes) else b"", dtype=np.float32)
    return Hit({name: text(value) for name, value in fields.items()}, vector)


def _total(reply: object) -> int:
    """The hit count of a `LIMIT 0 0` FT.SEARCH reply (RESP3 map or RESP2 list)."""
    if isinstance(reply, dict):
        return int(_get(reply, "total_results") or 0)
    if isinstance(reply, list) and reply:
        return int(reply[0])
    raise redis.ResponseError(f"unexpected FT.SEARCH reply: {reply!r:.200}")


def _get(reply: dict[Any, Any], name: str) -> Any:
    return reply.get(name.encode(), reply.get(name))
