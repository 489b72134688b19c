"""MemstreamStore: a LangGraph `BaseStore` whose writes are events on the memory log and whose
reads come from the Redis projection, so LangMem and any LangGraph graph get memstream's
tenant boundary, hybrid search, replay and erasure.

    put     one `ItemStored` event, keyed by the namespace's tenant. The item's memory id is
            its slot (tenant, namespace, key): a later put replaces it, as in InMemoryStore.
            The value rides in the memory's metadata; the text of the indexed fields (the
            whole value by default) is what recall searches, and `index=False` stores no text,
            so nothing is embedded. Returns once Kafka has the event (durable); with
            `read_your_writes=True`, once a worker has applied it.
    delete  one `MemoryForgotten` of the item's slot: gone from the projection and tombstoned
            against any repeat of an earlier put; a later put of the key writes it again.
    get     one read of the slot in the live projection.
    search  within one tenant (a prefix that does not name one is refused). With a `query`,
            the tenant's hybrid recall (BM25 and vectors, fused by score) orders the matching
            items, none collapsed as a near-duplicate of another (each key is its own item),
            and unindexed ones follow unscored, as InMemoryStore does; without one,
            items come oldest put first. Filters apply to the value: exact values and $eq $ne
            $gt $gte $lt $lte.
    list_namespaces  prefix, suffix (with "*"), max_depth, limit, offset, sorted. It reads one
            tenant when the prefix names one, otherwise every tenant's items: the namespaces
            are the graph's own, so listing them is the deployment's business, but it costs a
            scan (see docs/integrations.md).

Which tenant a namespace belongs to: `namespaces.NamespaceTenants`. Items count against the
tenant's bound (MEMSTREAM_MAX_MEMORIES) like every memory, and appear in the tenant's recall,
so a LangChain agent of the same tenant sees what LangMem's tools saved.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    validate_op_namespace,
)

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import InvalidInputError, KafkaUnavailableError, ProjectionLagError
from memstream.integrations.filters import check_filter, matches
from memstream.integrations.namespaces import WILDCARD, NamespaceTenants
from memstream.memory.events import (
    ITEM_KEY,
    ITEM_NAMESPACE,
    ITEM_VALUE,
    ItemStored,
    MemoryEvent,
    MemoryForgotten,
    item_memory_id,
)
from memstream.memory.model import Memory
from memstream.memory.ports import MAX_RECALL_K

__all__ = ["MemstreamStore"]


class MemstreamStore(BaseStore):
    """A LangGraph store on memstream. Build it with `MemstreamStore.from_env()`, or on a
    `Deployment` (the composition root) an application already has; `close()` closes that
    deployment's agent side (sends what is queued, stops the publisher)."""

    supports_ttl = False

    def __init__(
        self,
        deployment: Deployment,
        *,
        tenants: NamespaceTenants | None = None,
        fields: Sequence[str] = ("$",),
        read_your_writes: bool = False,
        durable_timeout_s: float = 10.0,
        applied_timeout_s: float = 30.0,
    ) -> None:
        self._deployment = deployment
        self._settings = deployment.settings
        self._stores = deployment.stores()
        self._reader = deployment.reader()
        self._recaller = deployment.recaller(deduplicate=False)
        self._status = deployment.status()
        self._tenants = tenants or NamespaceTenants(self._settings.langgraph_tenant_labels)
        self._fields = tuple(fields)
        self._read_your_writes = read_your_writes
        self._durable_timeout_s = durable_timeout_s
        self._applied_timeout_s = applied_timeout_s

    @classmethod
    def from_env(
        cls,
        *,
        settings: Settings | None = None,
        tenant_labels: Sequence[int] | None = None,
        fields: Sequence[str] = ("$",),
        read_your_writes: bool = False,
    ) -> MemstreamStore:
        """A store on the deployment the environment names (the same MEMSTREAM_* variables
        as the rest of memstream). `tenant_labels` overrides MEMSTREAM_LANGGRAPH_TENANT_LABELS;
        `fields` are the value paths whose text is searched ("$": the whole value)."""
        settings = settings or Settings.from_env()
        labels = tuple(tenant_labels) if tenant_labels is not None else None
        return cls(
            Deployment(settings),
            tenants=NamespaceTenants(labels) if labels else None,
            fields=fields,
            read_your_writes=read_your_writes,
        )

    def close(self) -> None:
        self._deployment.close()

    # -- BaseStore ----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Reads see the store as it was before the batch; the puts follow, the last put of a
        key winning (InMemoryStore's order)."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
                results.append(None)
            else:
                raise InvalidInputError(f"unknown store operation {type(op).__name__}")
        if puts:
            self._write([self._event(op) for op in puts.values()])
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The projection's reads and the publisher are synchronous clients; a thread keeps the
        # event loop free while they wait.
        return await asyncio.to_thread(self.batch, list(ops))

    # -- reads --------------------------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        tenant = self._tenants.tenant_of(op.namespace)
        memory_id = item_memory_id(tenant, tuple(op.namespace), op.key)
        memory = self._reader.memories_by_id(tenant, [memory_id])[0]
        return _item(memory) if memory is not None and ITEM_KEY in memory.metadata else None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        tenant = self._tenants.search_tenant(op.namespace_prefix)
        check_filter(op.filter)
        prefix = tuple(op.namespace_prefix)
        store = self._stores(tenant)
        candidates: dict[str, Item] = {}
        for memory in store.memories():  # oldest first
            if ITEM_KEY not in memory.metadata:
                continue
            item = _item(memory)
            if item.namespace[: len(prefix)] == prefix and matches(item.value, op.filter):
                candidates[memory.id] = item
        if not op.query:
            return [_scored(item) for item in candidates.values()][op.offset : op.offset + op.limit]
        ranked: list[SearchItem] = []
        for hit in self._recaller.recall(tenant, op.query, k=MAX_RECALL_K):
            if hit.memory.id in candidates and hit.memory.content:
                ranked.append(_scored(candidates.pop(hit.memory.id), hit.score))
        kept = ranked[op.offset : op.offset + op.limit]
        if len(kept) < op.limit:
            # As InMemoryStore does: what has no vector follows, unscored.
            kept.extend(_scored(item) for item in list(candidates.values())[: op.limit - len(kept)])
        return kept

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        pinned = [
            tenant
            for c in conditions
            if c.match_type == "prefix" and (tenant := self._tenants.pinned(c.path)) is not None
        ]
        tenants = pinned[:1] or [s.tenant for s in self._status.tenant_stats()]
        found: set[tuple[str, ...]] = set()
        for tenant in tenants:
            for memory in self._reader.memories(tenant):
                if ITEM_NAMESPACE in memory.metadata:
                    namespace = tuple(json.loads(memory.metadata[ITEM_NAMESPACE]))
                    if all(_namespace_matches(c, namespace) for c in conditions):
                        found.add(namespace)
        if op.max_depth is not None:
            found = {namespace[: op.max_depth] for namespace in found}
        return sorted(found)[op.offset : op.offset + op.limit]

    # -- writes -------------------------------------------------------------------------------

    def _event(self, op: PutOp) -> MemoryEvent:
        namespace = tuple(op.namespace)
        tenant = self._tenants.tenant_of(namespace)
        now = datetime.now(UTC)
        if op.value is None:
            return MemoryForgotten(
                tenant=tenant,
                request_id=uuid.uuid4().hex,
                requested_at=now,
                memory_ids=(item_memory_id(tenant, namespace, op.key),),
            )
        if op.ttl is not None:
            raise InvalidInputError(
                "MemstreamStore keeps items until they are deleted, forgotten or evicted; it "
                "has no TTL. Put the item without ttl."
            )
        if not isinstance(op.value, Mapping):
            raise InvalidInputError(
                f"a store value must be a mapping, got {type(op.value).__name__}"
            )
        try:
            value = json.dumps(dict(op.value), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"the value of {namespace!r}/{op.key!r} is not JSON ({exc}); store strings, "
                "numbers, booleans, lists and mappings"
            ) from None
        settings = self._settings
        return ItemStored(
            tenant=tenant,
            namespace=namespace,
            key=op.key,
            put_id=uuid.uuid4().hex,
            value=value,
            text=self._text(op.value, op.index)[: settings.max_record_chars],
            recorded_at=now,
            importance=settings.default_importance,
            embedding_model=self._stores(tenant).embedding_model,
        )

    def _text(self, value: Mapping[str, Any], index: Any) -> str:
        if index is False:
            return ""
        paths = self._fields if index is None else tuple(index)
        return "\n".join(text for path in paths for text in get_text_at_path(value, path))

    def _write(self, events: list[MemoryEvent]) -> None:
        acknowledged = [threading.Event() for _ in events]
        for event, flag in zip(events, acknowledged, strict=True):
            self._stores(event.tenant).write(event, on_durable=flag.set)
        deadline = time.monotonic() + self._durable_timeout_s
        for flag in acknowledged:
            if not flag.wait(max(deadline - time.monotonic(), 0.0)):
                raise KafkaUnavailableError(
                    f"Kafka did not acknowledge the store's write within "
                    f"{self._durable_timeout_s:.0f} s; it stays queued and is sent when Kafka "
                    "answers, but it is not durable yet. Check the broker (`memstream status`)."
                )
        if self._read_your_writes:
            self._wait_applied(events)

    def _wait_applied(self, events: Sequence[MemoryEvent]) -> None:
        pending = self._status.wait_applied(events, self._applied_timeout_s)
        if pending:
            raise ProjectionLagError(
                f"store writes of {len(pending)} tenant(s) are in Kafka but no worker applied "
                f"them within {self._applied_timeout_s:.0f} s; is `memstream worker` running "
                "on this namespace?"
            )


def _item(memory: Memory) -> Item:
    return Item(
        namespace=tuple(json.loads(memory.metadata[ITEM_NAMESPACE])),
        key=memory.metadata[ITEM_KEY],
        value=json.loads(memory.metadata[ITEM_VALUE]),
        created_at=memory.timestamp,
        updated_at=memory.timestamp,
    )


def _scored(item: Item, score: float | None = None) -> SearchItem:
    return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidInputError(
            f"namespaces match by 'prefix' or 'suffix', not {condition.match_type!r}"
        )
    return all(want == WILDCARD or label == want for label, want in pairs)
