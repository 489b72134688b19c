"""The Redis layout of the memory projection: key names, hash fields and the RedisVL index schema.

Every key starts with the namespace, and every per-tenant key carries the tenant as its token
(hex of the UTF-8 id, see memory.tenancy), so no tenant id can change a key's shape.

A projection lives in a *generation*: every key of its state carries the generation, so a
replay can build generation g+1 beside the live generation g and swap it in at once:

    {ns}:layout                        STRING the shard layout, JSON (shard 0 only; absent: the
                                              settings' MEMSTREAM_REDIS_SHARDS, version 1)
    {ns}:generation                    STRING the live generation (absent: 1)
    {ns}:generations                   STRING the last generation number handed out
    {ns}:memories                      FT alias of the live generation's index (recall uses it)
    {ns}:memories:v{V}:g{g}            FT index over {ns}:g{g}:mem:
    {ns}:g{g}:mem:{token}:{memory_id}  HASH   one memory (fields below; `lineage`: where it
                                              came from, docs/lineage.md)
    {ns}:g{g}:order:{token}            ZSET   the tenant's memories in eviction order
    {ns}:g{g}:threads:{token}:{thread} ZSET   a thread's conversation memories in time order,
                                              then the log's (orders.lua; the thread as its hex
                                              tag): thread neighbours are read here
    {ns}:g{g}:threads:{token}:s:{subj} ZSET   a subject's extracted facts by valid-from
                                              (orders.lua; the subject's key): recall reads
                                              until when a fact held here (memory.validity)
    {ns}:g{g}:applied:{token}          HASH   event id -> recorded outcome: apply-once markers
    {ns}:g{g}:forgotten:{token}        SET    tombstones: memory ids no event may write again
    {ns}:g{g}:positions                HASH   "topic/partition" -> last offset taken into account
    {ns}:g{g}:meta                     HASH   what the index was built with (model, dims,
                                              vector type: none is float32)

Sessions' working memory is state, not projection: no generation, kept across rebuilds, and
in the tenant's key space (its token) so that a shard router routes it with the tenant:

    {ns}:wm:{token}:s:{session_id}     HASH   one session: document (JSON), version
    {ns}:wm:{token}:sessions           ZSET   the tenant's sessions, scored by expiry (inf: none)
    {ns}:wm:{token}:owners             HASH   session id -> its non-tenant scoping value

The index schema is versioned data: a change of fields is a new `INDEX_VERSION`, built by a
replay into a fresh generation rather than altered in place.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any

import numpy as np
from redisvl.schema import IndexSchema

from memstream.memory.bounds import eviction_key
from memstream.memory.embeddings import Vectors
from memstream.memory.model import Memory, MemoryType, derived_from
from memstream.memory.provenance import Provenance
from memstream.memory.ranking.tokens import when_text
from memstream.memory.tenancy import tenant_from_token, tenant_token
from memstream.memory.validity import subject_key, valid_from

__all__ = [
    "INDEX_VERSION",
    "Fields",
    "Keyspace",
    "VectorType",
    "from_hash",
    "lineage_field",
    "lua",
    "memory_id_of",
    "memory_index_schema",
    "order_member",
    "query_blob",
    "to_hash",
    "vector_of",
]

INDEX_VERSION = 2


class VectorType(enum.StrEnum):
    """How a generation stores its vectors, in its hashes and its index (its meta's
    `vector_type`; a generation from before the choice has none and is FLOAT32). FLOAT16 takes
    half the bytes of both copies and ranks LoCoMo's questions as FLOAT32 does
    (docs/benchmarks.md); a replay moves a namespace from one to the other."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"

    def cast(self, vector: Vectors) -> Vectors:
        """`vector` in this type: how it is stored, and how a query for this generation's
        index travels."""
        return np.asarray(vector, dtype=self.value)

    def read(self, blob: bytes) -> Vectors:
        """A vector stored in this type, as float32 (what ranking computes with)."""
        stored = np.frombuffer(blob, dtype=self.value)
        return stored if self is VectorType.FLOAT32 else stored.astype(np.float32)


def vector_of(blob: bytes, dims: int) -> Vectors:
    """A stored vector of `dims` dimensions as float32, whichever type its generation stores:
    its length says (2 or 4 bytes a dimension)."""
    return (VectorType.FLOAT16 if len(blob) == 2 * dims else VectorType.FLOAT32).read(blob)


def query_blob(vector: Vectors) -> bytes:
    """A query vector's bytes for FT.SEARCH: float16 as it is (`VectorType.cast` made it for a
    float16 index), anything else as float32."""
    array = np.asarray(vector)
    return (array if array.dtype == np.float16 else array.astype(np.float32)).tobytes()


class Fields:
    """Hash field names of a stored memory, in one place."""

    ID = "id"
    TENANT = "tenant"
    TENANT_TAG = "tenant_tag"
    THREAD = "thread"
    THREAD_TAG = "thread_tag"
    CONTENT = "content"
    WHEN = "when"
    MEMORY_TYPE = "memory_type"
    ROLE = "role"
    IMPORTANCE = "importance"
    TIMESTAMP = "timestamp"
    METADATA = "metadata"
    EVENT_ID = "event_id"
    EMBEDDING_MODEL = "embedding_model"
    EMBEDDING = "embedding"
    # Only on memories that have them (store items): the facets' texts (JSON), their vectors
    # (float32, one after another, not indexed: scored beside the index, per item), and the
    # epoch second the memory lapses (moved later by a read that refreshes it).
    FACETS = "facets"
    FACET_VECTORS = "facet_vectors"
    EXPIRES_AT = "expires_at"
    # The memory's provenance beyond its event id and thread (`lineage_field`): absent on
    # memories written before lineage was kept, until a replay writes them again.
    LINEAGE = "lineage"
    # Not part of the memory: its member in the order set, so a removal by id is O(1).
    ORDER_MEMBER = "order_member"
    # Only on a memory derived from others (an extracted fact): their ids, space-separated, so
    # a forget of one of them finds it without decoding every memory's metadata.
    DERIVED_FROM = "derived_from"
    # Only on a fact that names a subject: the subject's key and the fact's valid-from (epoch
    # s), which place it in its subject's order (orders.lua, memory.validity).
    SUBJECT = "subject"
    VALID_FROM = "valid_from"

    RETURNED = (
        ID,
        TENANT,  # held only by memories written before lineage: the tag says the same
        TENANT_TAG,
        THREAD,
        CONTENT,
        MEMORY_TYPE,
        ROLE,
        IMPORTANCE,
        TIMESTAMP,
        METADATA,
        EVENT_ID,
        EMBEDDING_MODEL,
        FACETS,
        EXPIRES_AT,
        LINEAGE,
    )


@dataclass(frozen=True, slots=True)
class Keyspace:
    """Names of every Redis key and index of one generation of one namespace."""

    namespace: str
    generation: int = 1

    def at(self, generation: int) -> Keyspace:
        return Keyspace(self.namespace, generation)

    def holding(self, key: str) -> Keyspace:
        """The keyspace of the generation whose key `key` is (one a search returned)."""
        generation, colon, _ = key.removeprefix(f"{self.namespace}:g").partition(":")
        if not key.startswith(f"{self.namespace}:g") or not colon or not generation.isdigit():
            raise ValueError(f"{key!r} is no key of a generation of {self.namespace!r}")
        return self.at(int(generation))

    @property
    def layout_key(self) -> str:
        return f"{self.namespace}:layout"

    @property
    def generation_key(self) -> str:
        return f"{self.namespace}:generation"

    @property
    def generation_counter(self) -> str:
        return f"{self.namespace}:generations"

    @property
    def alias(self) -> str:
        return f"{self.namespace}:memories"

    def process(self, host: str, pid: int) -> str:
        """A running process's heartbeat for `memstream status` (health.Heartbeat); it
        expires when the process stops refreshing it."""
        return f"{self.namespace}:process:{host}:{pid}"

    @property
    def process_pattern(self) -> str:
        return f"{self.namespace}:process:*"

    def process_lags(self, kind: str, host: str, pid: int) -> str:
        """A process's reported lags, a ZSET scored by report time (member "time:lag"), kept
        for `LAG_HISTORY` after its last report (the console's plot)."""
        return f"{self.namespace}:lags:{kind}:{host}:{pid}"

    @property
    def process_lags_pattern(self) -> str:
        return f"{self.namespace}:lags:*"

    @property
    def generation_prefix(self) -> str:
        return f"{self.namespace}:g{self.generation}:"

    @property
    def index_name(self) -> str:
        return f"{self.namespace}:memories:v{INDEX_VERSION}:g{self.generation}"

    @property
    def memory_prefix(self) -> str:
        return f"{self.generation_prefix}mem:"

    @property
    def positions(self) -> str:
        return f"{self.generation_prefix}positions"

    @property
    def meta(self) -> str:
        return f"{self.generation_prefix}meta"

    def memory(self, tenant: str, memory_id: str) -> str:
        return f"{self.memory_prefix}{tenant_token(tenant)}:{memory_id}"

    def tenant_memory_prefix(self, tenant: str) -> str:
        return f"{self.memory_prefix}{tenant_token(tenant)}:"

    def order(self, tenant: str) -> str:
        return f"{self.generation_prefix}order:{tenant_token(tenant)}"

    def applied(self, tenant: str) -> str:
        return f"{self.generation_prefix}applied:{tenant_token(tenant)}"

    def forgotten(self, tenant: str) -> str:
        return f"{self.generation_prefix}forgotten:{tenant_token(tenant)}"

    def documents(self, tenant: str) -> str:
        """The tenant's documents (events.DocumentChange): field -> JSON."""
        return f"{self.generation_prefix}docs:{tenant_token(tenant)}"

    def session(self, tenant: str, session_id: str) -> str:
        return f"{self.namespace}:wm:{tenant_token(tenant)}:s:{session_id}"

    def sessions(self, tenant: str) -> str:
        return f"{self.namespace}:wm:{tenant_token(tenant)}:sessions"

    def session_owners(self, tenant: str) -> str:
        return f"{self.namespace}:wm:{tenant_token(tenant)}:owners"

    def orders_prefix(self, tenant: str) -> str:
        """The prefix of the tenant's thread and subject order keys (a thread's hex tag, or
        's:' and a subject's key, completes one: orders.lua)."""
        return f"{self.generation_prefix}threads:{tenant_token(tenant)}:"

    def tenant_keys(self, tenant: str) -> tuple[str, str, str, str]:
        """The per-tenant keys besides the memory hashes: order, applied, forgotten, documents."""
        return (
            self.order(tenant),
            self.applied(tenant),
            self.forgotten(tenant),
            self.documents(tenant),
        )


def lua(name: str) -> str:
    """The script `name` of this package with orders.lua's functions before it: the one
    statement of a memory's places in its thread and subject, for every script that reads or
    moves one."""
    package = files("memstream.projections")
    return package.joinpath("orders.lua").read_text() + package.joinpath(name).read_text()


def order_member(memory: Memory) -> str:
    """The memory's member in its tenant's eviction-order set: `bounds.eviction_key` as a
    string whose lexicographic order is the key's order (fixed-width digits; the id follows
    the last ':')."""
    importance, micros, memory_id = eviction_key(memory)
    return f"{importance:07d}:{micros:017d}:{memory_id}"


def memory_id_of(member: str) -> str:
    """The memory id inside an order member (apply_once.lua's `id_of` says the same)."""
    return member.rsplit(":", 1)[1]


def memory_index_schema(
    keyspace: Keyspace, dims: int, vector_type: VectorType = VectorType.FLOAT32
) -> IndexSchema:
    # The tenant and thread TAGs hold hex tokens, so the default separator and case folding
    # can never merge two ids; they are still escaped at query time.
    fields: list[dict[str, Any]] = [
        {"name": Fields.TENANT_TAG, "type": "tag", "attrs": {"case_sensitive": True}},
        {"name": Fields.THREAD_TAG, "type": "tag", "attrs": {"case_sensitive": True}},
        {"name": Fields.MEMORY_TYPE, "type": "tag"},
        {"name": Fields.CONTENT, "type": "text"},
        # The memory's date in words, searched with the content: questions about the past
        # name days and months ("what did I say on 7 May?").
        {"name": Fields.WHEN, "type": "text"},
        {"name": Fields.IMPORTANCE, "type": "numeric"},
        {"name": Fields.TIMESTAMP, "type": "numeric", "attrs": {"sortable": True}},
        # FLAT, not HNSW: recall's KNN is HYBRID_POLICY ADHOC_BF (projections.recall), which
        # scores the tenant's vectors by brute force and never walks a graph, so a graph would
        # only cost time at every write, replay and restart, and memory. Indexes created as
        # HNSW by earlier versions answer the same queries and give way at the next replay.
        {
            "name": Fields.EMBEDDING,
            "type": "vector",
            "attrs": {
                "algorithm": "flat",
                "dims": dims,
                "distance_metric": "cosine",
                "datatype": vector_type.value,
            },
        },
    ]
    return IndexSchema.from_dict(
        {
            "index": {
                "name": keyspace.index_name,
                "prefix": keyspace.memory_prefix,
                "storage_type": "hash",
            },
            "fields": fields,
        }
    )


def to_hash(
    memory: Memory,
    vector: Vectors,
    facet_vectors: Vectors | None = None,
    vector_type: VectorType = VectorType.FLOAT32,
) -> dict[str, str | bytes]:
    """A memory as the fields of its Redis hash (`facet_vectors`: one row per facet), its
    vector in its generation's `vector_type`."""
    fields: dict[str, str | bytes] = {
        Fields.ID: memory.id,
        # Not Fields.TENANT: the tag is its hex, and a 17th field would double the hash's
        # bucket table (about 130 bytes a memory), which lineage's field could not afford.
        Fields.TENANT_TAG: tenant_token(memory.tenant),
        Fields.THREAD: memory.thread,
        Fields.THREAD_TAG: memory.thread.encode("utf-8").hex(),
        Fields.CONTENT: memory.content,
        Fields.WHEN: when_text(memory.timestamp),
        Fields.MEMORY_TYPE: memory.memory_type.value,
        Fields.ROLE: memory.role,
        Fields.IMPORTANCE: repr(memory.importance),
        Fields.TIMESTAMP: repr(memory.timestamp.timestamp()),
        Fields.METADATA: _metadata_field(memory.metadata),
        Fields.EVENT_ID: memory.event_id,
        Fields.EMBEDDING_MODEL: memory.embedding_model,
        Fields.EMBEDDING: vector_type.cast(vector).tobytes(),
        Fields.ORDER_MEMBER: order_member(memory),
    }
    if memory.facets:
        fields[Fields.FACETS] = json.dumps(list(memory.facets), ensure_ascii=False)
        if facet_vectors is not None:
            fields[Fields.FACET_VECTORS] = np.asarray(facet_vectors, dtype=np.float32).tobytes()
    if memory.expires_at is not None:
        fields[Fields.EXPIRES_AT] = repr(memory.expires_at.timestamp())
    if memory.provenance is not None:
        fields[Fields.LINEAGE] = lineage_field(memory.provenance)
    if sources := derived_from(memory):
        fields[Fields.DERIVED_FROM] = " ".join(sources)
    if subject := subject_key(memory):
        fields[Fields.SUBJECT] = subject
        fields[Fields.VALID_FROM] = repr(valid_from(memory).timestamp())
    return fields


def _metadata_field(metadata: Mapping[str, Any]) -> str:
    # Most memories (every turn's) have none: no encoder call for those.
    return json.dumps(dict(metadata), ensure_ascii=False, sort_keys=True) if metadata else "{}"


# The memories of one event share its provenance: encoded once, not once per memory (a few
# microseconds a memory, on the projection's write path: docs/benchmarks.md, "lineage").
@functools.lru_cache(maxsize=256)
def lineage_field(provenance: Provenance) -> str:
    """A provenance as its hash field: a JSON array, without the event id and thread the
    hash holds already (Redis bytes per memory stay within a tenth of what they were). The
    ids a fact was derived from follow the replaced ones as one last array (hashes written
    before extraction have none)."""
    p = provenance
    row: list[object] = [p.event_type, p.event_version, p.topic, p.partition, p.offset, p.run]
    row += [p.turn, repr(p.recorded_at.timestamp()), *p.replaced]
    if p.derived:
        row.append(list(p.derived))
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def _provenance(raw: str | None, event_id: str, thread: str) -> Provenance | None:
    if not raw:
        return None
    kind, version, topic, partition, offset, run, turn, at, *replaced = json.loads(raw)
    derived = replaced.pop() if replaced and isinstance(replaced[-1], list) else ()
    return Provenance(
        event_id=event_id,
        event_type=kind,
        event_version=version,
        topic=topic,
        partition=partition,
        offset=offset,
        thread=thread,
        run=run,
        turn=turn,
        recorded_at=datetime.fromtimestamp(float(at), UTC),
        replaced=tuple(replaced),
        derived=tuple(derived),
    )


def from_hash(fields: Mapping[str, str]) -> Memory:
    """The memory a hash (or a search result's returned fields) holds."""
    return Memory(
        id=fields[Fields.ID],
        tenant=fields.get(Fields.TENANT) or _tenant_of(fields[Fields.TENANT_TAG]),
        content=fields[Fields.CONTENT],
        memory_type=MemoryType(fields[Fields.MEMORY_TYPE]),
        thread=fields[Fields.THREAD],
        timestamp=datetime.fromtimestamp(float(fields[Fields.TIMESTAMP]), UTC),
        importance=float(fields[Fields.IMPORTANCE]),
        event_id=fields[Fields.EVENT_ID],
        role=fields.get(Fields.ROLE, ""),
        metadata=_json(fields.get(Fields.METADATA)) or {},
        embedding_model=fields.get(Fields.EMBEDDING_MODEL, ""),
        facets=tuple(_json(fields.get(Fields.FACETS)) or ()),
        expires_at=_epoch(fields.get(Fields.EXPIRES_AT)),
        provenance=_provenance(
            fields.get(Fields.LINEAGE), fields[Fields.EVENT_ID], fields[Fields.THREAD]
        ),
    )


# Recall reads every candidate's hash (tens a query): what most of them hold is said once.
_tenant_of = functools.lru_cache(maxsize=4096)(tenant_from_token)


def _json(raw: str | None) -> Any:
    """A JSON field's value; None where the field is absent or holds an empty {} or []."""
    return json.loads(raw) if raw and raw not in ("{}", "[]") else None


def _epoch(raw: str | None) -> datetime | None:
    return None if not raw else datetime.fromtimestamp(float(raw), UTC)
