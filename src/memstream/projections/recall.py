"""The projection's read side: recall a tenant's memories, synchronously, by words and meaning.

A recall sends two FT.SEARCH queries in one pipelined round trip and fuses their rankings:

- `LexicalQuery`: BM25 (`SCORER BM25`) over the `content` TEXT field. The user's text is
  cut into word tokens, stopwords are dropped, and every token is escaped, so the query is
  always a plain union of terms: nothing the user types can become a query operator, a field
  name or a wildcard. Names and dates, which dominate questions about past conversations,
  are matched exactly here (measured on LoCoMo: BM25 alone beats the MiniLM vectors).
- `VectorQuery`: a KNN over the memory vectors. HYBRID_POLICY ADHOC_BF scores every vector
  that passes the tenant filter instead of walking the HNSW graph and discarding other
  tenants' hits: a tenant is bounded (MEMSTREAM_MAX_MEMORIES) and usually a small part of a
  shared index, where the graph walk can time out (measured: a 1M-vector index with a filter
  matching one document took over 500 ms without it, 0.2 ms with it).

Both go to the alias of the live generation's index, so recall keeps answering while a
replay rebuilds the next generation and switches when that one is swapped in. Both are
filtered on the server to the tenant's TAG (`TenantFilter`), whose value is the hex
token of the tenant id, so isolation never depends on the text. Redis 7.4 / search 2.10 has
no FT.HYBRID, so the fusion is client side: reciprocal rank fusion (`projections.fusion`).

Every query is a frozen value that renders to the exact FT.SEARCH arguments; the unit tests
check those strings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis

from memstream.errors import InvalidInputError
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.model import RecalledMemory
from memstream.memory.tenancy import tenant_token, validate_tenant
from memstream.projections.connection import is_missing_index, redis_errors, text
from memstream.projections.fusion import RRF_K, reciprocal_rank_fusion
from memstream.projections.schema import Fields, Keyspace, from_hash

__all__ = [
    "MAX_QUERY_TERMS",
    "MAX_RECALL_K",
    "STOPWORDS",
    "HybridQuery",
    "LexicalQuery",
    "RedisRecaller",
    "TenantFilter",
    "VectorQuery",
    "escape_term",
    "query_terms",
    "word_tokens",
]

MAX_RECALL_K = 1000
MAX_QUERY_TERMS = 64
# Each list contributes this many candidates (at least k) to the fusion. Deeper is worse, not
# just slower: past ~20, items that both lists rank mediocre (say 25th and 30th) outscore an
# item one list ranks first. Measured on the LoCoMo dev split, RRF k = 60: recall@10 0.600
# with 20 candidates, 0.542 with 50 (docs/benchmarks.md).
CANDIDATES = 20

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
    names = [*Fields.RETURNED, *extra]
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
        terms = self.terms
        if not terms:
            return None
        union = "|".join(escape_term(term) for term in terms)
        return f"({TenantFilter(self.tenant).render()}) (@{Fields.CONTENT}|{Fields.WHEN}:({union}))"

    def command(self, index: str) -> list[str | int | bytes] | None:
        rendered = self.render()
        if rendered is None:
            return None
        # BM25, not the default TFIDF: measured on LoCoMo, lexical recall@10 0.503 with BM25,
        # 0.484 with BM25STD, 0.438 with TFIDF.
        return [
            "FT.SEARCH",
            index,
            rendered,
            "SCORER",
            "BM25",
            *_returned_fields(),
            "LIMIT",
            0,
            self.k,
            "DIALECT",
            2,
        ]


@dataclass(frozen=True, slots=True)
class HybridQuery:
    """Words and meaning for one tenant, each asked for `candidates` hits, fused, cut to k."""

    tenant: str
    text: str
    vector: Vectors
    k: int = 10
    candidates: int = CANDIDATES
    rrf_k: int = RRF_K

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        _check_k(self.k)
        if self.candidates < 1:
            raise InvalidInputError(f"candidates must be at least 1, got {self.candidates}")

    @property
    def depth(self) -> int:
        return min(max(self.k, self.candidates), MAX_RECALL_K)

    @property
    def lexical(self) -> LexicalQuery:
        return LexicalQuery(self.tenant, self.text, self.depth)

    @property
    def semantic(self) -> VectorQuery:
        return VectorQuery(self.tenant, self.vector, self.depth)


class RedisRecaller:
    """Recall over the Redis projection; unknown tenants (and a missing index) recall nothing.

    `recall` is hybrid. Its `score` is the reciprocal-rank-fusion score scaled to 0..1: 1.0
    means ranked first by both words and meaning, 0.5 ranked first by one of them and not
    found by the other; it orders results, it is not a similarity. `recall_vector` is the
    vector-only path, whose `score` is the cosine similarity.
    """

    def __init__(
        self, client: redis.Redis, keyspace: Keyspace, embedder: Embedder, *, url: str = ""
    ) -> None:
        self._client = client
        self._keys = keyspace
        self._embedder = embedder
        self._url = url

    def recall(self, tenant: str, text: str, k: int = 10) -> list[RecalledMemory]:
        return self.search(HybridQuery(tenant, text, self._embedder.embed_query(text), k))

    def recall_vector(self, tenant: str, text: str, k: int = 10) -> list[RecalledMemory]:
        return self.search_vector(VectorQuery(tenant, self._embedder.embed_query(text), k))

    def search(self, query: HybridQuery) -> list[RecalledMemory]:
        """Both searches in one round trip, fused by reciprocal rank."""
        commands = [query.semantic.command(self._keys.alias)]
        lexical = query.lexical.command(self._keys.alias)
        if lexical is not None:
            commands.append(lexical)
        replies = self._run(commands)
        if replies is None:
            return []
        rankings = [_parse_reply(reply) for reply in replies]
        by_key = {key: fields for ranking in rankings for key, fields in ranking}
        fused = reciprocal_rank_fusion(
            [[key for key, _ in ranking] for ranking in rankings], k=query.rrf_k
        )
        # Scaled by the best possible score (first in both lists) so 1.0 means exactly that,
        # whether or not the text had searchable words.
        best = 2.0 / (query.rrf_k + 1)
        return [
            RecalledMemory(memory=from_hash(by_key[key]), score=min(score / best, 1.0))
            for key, score in fused[: query.k]
        ]

    def search_vector(self, query: VectorQuery) -> list[RecalledMemory]:
        replies = self._run([query.command(self._keys.alias)])
        if replies is None:
            return []
        return [
            RecalledMemory(memory=from_hash(fields), score=1.0 - float(fields[_DISTANCE]))
            for _, fields in _parse_reply(replies[0])
        ]

    def _run(self, commands: list[list[str | int | bytes]]) -> list[object] | None:
        """Replies of `commands`, sent pipelined; None when the index does not exist yet."""
        with redis_errors(self._url, "recalling memories"):
            pipe = self._client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)  # type: ignore[no-untyped-call]
            try:
                return list(pipe.execute())
            except redis.ResponseError as exc:
                if is_missing_index(exc):
                    return None
                raise


def _parse_reply(reply: object) -> list[tuple[str, dict[str, str]]]:
    """(key, fields) of each hit of a raw FT.SEARCH reply, in rank order.

    redis-py 8 speaks RESP3 by default (a map per reply); RESP2 (a flat list) is read too, so
    a client configured either way works.
    """
    if isinstance(reply, dict):
        hits3: list[tuple[str, dict[str, str]]] = []
        for hit in _get(reply, "results") or []:
            attributes = _get(hit, "extra_attributes") or {}
            fields = {text(name): text(value) for name, value in attributes.items()}
            hits3.append((text(_get(hit, "id")), fields))
        return hits3
    if not isinstance(reply, list) or not reply:
        raise redis.ResponseError(f"unexpected FT.SEARCH reply: {reply!r:.200}")
    hits = []
    for at in range(1, len(reply) - 1, 2):
        key, flat = reply[at], reply[at + 1]
        fields = {text(flat[i]): text(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}
        hits.append((text(key), fields))
    return hits


def _get(reply: dict[Any, Any], name: str) -> Any:
    return reply.get(name.encode(), reply.get(name))
