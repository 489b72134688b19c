"""MemstreamStore: a LangGraph `BaseStore` whose writes are events on the memory log and whose
reads come from the Redis projection, so LangMem and any LangGraph graph get memstream's
tenant boundary, replay and erasure, with LangGraph's own search semantics and TTLs.

    put     one `ItemStored` event, keyed by the namespace's tenant. The item's memory id is
            its slot (tenant, namespace, key): a later put replaces it, as in InMemoryStore.
            The value rides in the memory's metadata; the text at each indexed field path
            (`index={"fields": [...]}`, or `put(..., index=[...])`; the whole value by
            default) is embedded apart, and `index=False` stores no text, so nothing is
            embedded. A `ttl` (minutes; TTLConfig's `default_ttl`) rides in the event too.
            Returns once Kafka has the event (durable); with `read_your_writes=True`, once a
            worker has applied it.
    delete  one `MemoryForgotten` of the item's slot: gone from the projection and tombstoned
            against any repeat of an earlier put; a later put of the key writes it again.
    get     one read of the slot in the live projection; with `refresh_ttl`, the item's TTL
            starts again (TTLConfig's `refresh_on_read`, True by default).
    search  within one tenant (a prefix that does not name one is refused). With a `query`,
            each matching item scores the cosine similarity of its best indexed field (one
            vector per field, as LangGraph's stores), best first, and unindexed ones follow
            unscored, as InMemoryStore does; without one, items come oldest put first.
            Filters apply to the value: exact values and $eq $ne $gt $gte $lt $lte.
    TTL     an item put with a TTL lapses that many minutes after its put or its last
            refreshing read. `sweep_ttl()` (or the thread `start_ttl_sweeper()` runs, every
            `sweep_interval_minutes`) writes one `ItemExpired` per lapsed item to the log, so
            a replay expires what had expired; until then a lapsed item is still read, unless
            TTLConfig's `omit_expired` is set, as in LangGraph's stores.
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
import concurrent.futures
import json
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
    validate_op_namespace,
)

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import (
    InfrastructureError,
    InvalidInputError,
    KafkaUnavailableError,
    ProjectionLagError,
)
from memstream.integrations.filters import check_filter, matches
from memstream.integrations.namespaces import WILDCARD, NamespaceTenants
from memstream.memory.events import (
    ITEM_KEY,
    ITEM_NAMESPACE,
    ITEM_TTL,
    ITEM_VALUE,
    ItemExpired,
    ItemStored,
    MemoryEvent,
    MemoryForgotten,
    item_memory_id,
)
from memstream.memory.model import Memory
from memstream.memory.tenancy import TenantId, validate_tenant

__all__ = ["MemstreamStore"]

# The TTL refreshes a batch's reads owe, by tenant: (memory id, the put's event id, deadline).
Leases = dict[TenantId, list[tuple[str, str, datetime]]]


class MemstreamStore(BaseStore):
    """A LangGraph store on memstream. Build it with `MemstreamStore.from_env()`, or on a
    `Deployment` (the composition root) an application already has; `close()` stops the TTL
    sweeper and closes that deployment's agent side (sends what is queued, stops the
    publisher).

    `index` is LangGraph's IndexConfig: its `fields` are the value paths embedded, each
    apart ("$": the whole value, the default); the vectors are the deployment's embedder's
    (MEMSTREAM_EMBEDDER), so `embed` and `dims` are not read (`index_config` says what is
    used). `ttl` is LangGraph's TTLConfig."""

    supports_ttl = True

    def __init__(
        self,
        deployment: Deployment,
        *,
        tenants: NamespaceTenants | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        read_your_writes: bool = False,
        durable_timeout_s: float = 10.0,
        applied_timeout_s: float = 30.0,
    ) -> None:
        self._deployment = deployment
        self._settings = deployment.settings
        self._stores = deployment.stores()
        self._reader = deployment.reader()
        self._items = deployment.items()
        self._status = deployment.status()
        self._tenants = tenants or NamespaceTenants(self._settings.langgraph_tenant_labels)
        self._fields = _fields(index)
        self.ttl_config = ttl
        self._read_your_writes = read_your_writes
        self._durable_timeout_s = durable_timeout_s
        self._applied_timeout_s = applied_timeout_s
        self._sweeper: threading.Thread | None = None
        self._stop_sweeping = threading.Event()

    @classmethod
    def from_env(
        cls,
        *,
        settings: Settings | None = None,
        tenant_labels: Sequence[int] | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        read_your_writes: bool = False,
    ) -> MemstreamStore:
        """A store on the deployment the environment names (the same MEMSTREAM_* variables
        as the rest of memstream). `tenant_labels` overrides MEMSTREAM_LANGGRAPH_TENANT_LABELS."""
        settings = settings or Settings.from_env()
        labels = tuple(tenant_labels) if tenant_labels is not None else None
        return cls(
            Deployment(settings),
            tenants=NamespaceTenants(labels) if labels else None,
            index=index,
            ttl=ttl,
            read_your_writes=read_your_writes,
        )

    @property
    def index_config(self) -> IndexConfig:
        """What the store indexes: the field paths, and the model and dimensions of the
        deployment's embedder (loaded on first use)."""
        embedder = self._deployment.embedder
        return IndexConfig(dims=embedder.dims, embed=embedder.model_id, fields=list(self._fields))

    def close(self) -> None:
        self.stop_ttl_sweeper()
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
        now = datetime.now(UTC)
        leases: Leases = {}
        for op in ops:
            if isinstance(op, GetOp):
                item = self._get(op, now, leases)
                results.append(item)
            elif isinstance(op, SearchOp):
                results.append(self._search(op, now, leases))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op, now))
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
                results.append(None)
            else:
                raise InvalidInputError(f"unknown store operation {type(op).__name__}")
        for tenant, held in leases.items():
            self._items.refresh(tenant, held)
        if puts:
            self._write([self._event(op) for op in puts.values()])
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The projection's reads and the publisher are synchronous clients; a thread keeps the
        # event loop free while they wait.
        return await asyncio.to_thread(self.batch, list(ops))

    # -- TTL ----------------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Expire every item whose TTL ran out: one `ItemExpired` each, durable on return
        (applied too, with `read_your_writes`). Returns how many."""
        now = datetime.now(UTC)
        expiries: list[MemoryEvent] = []
        for stats in self._status.tenant_stats():
            for memory in self._reader.memories(stats.tenant):
                deadline = memory.expires_at
                if ITEM_KEY in memory.metadata and deadline is not None and deadline <= now:
                    expiries.append(
                        ItemExpired(
                            tenant=memory.tenant,
                            namespace=tuple(json.loads(memory.metadata[ITEM_NAMESPACE])),
                            key=memory.metadata[ITEM_KEY],
                            put_event_id=memory.event_id,
                            deadline=deadline,
                            expired_at=now,
                        )
                    )
        if expiries:
            self._write(expiries)
        return len(expiries)

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep every `sweep_interval_minutes` (TTLConfig's by default) on a thread until
        `stop_ttl_sweeper()`; the future completes when it stops (at once without an interval).
        A sweep that fails (Kafka or Redis away) is tried again at the next interval."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        interval = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        if not interval or (self._sweeper is not None and self._sweeper.is_alive()):
            done.set_result(None)
            return done
        self._stop_sweeping.clear()

        def sweep() -> None:
            try:
                while not self._stop_sweeping.wait(interval * 60):
                    try:
                        self.sweep_ttl()
                    except (KafkaUnavailableError, ProjectionLagError, InfrastructureError):
                        continue  # the next interval tries again; nothing was lost
            finally:
                done.set_result(None)

        self._sweeper = threading.Thread(target=sweep, name="memstream-ttl-sweeper", daemon=True)
        self._sweeper.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; False if it was still sweeping after `timeout` seconds."""
        if self._sweeper is None or not self._sweeper.is_alive():
            return True
        self._stop_sweeping.set()
        self._sweeper.join(timeout)
        return not self._sweeper.is_alive()

    # -- reads --------------------------------------------------------------------------------

    def _get(self, op: GetOp, now: datetime, leases: Leases) -> Item | None:
        tenant = self._tenants.tenant_of(op.namespace)
        memory_id = item_memory_id(tenant, tuple(op.namespace), op.key)
        memory = self._reader.memories_by_id(tenant, [memory_id])[0]
        if memory is None or ITEM_KEY not in memory.metadata or self._omitted(memory, now):
            return None
        if op.refresh_ttl:
            self._lease(memory, now, leases)
        return _item(memory)

    def _search(self, op: SearchOp, now: datetime, leases: Leases) -> list[SearchItem]:
        tenant = self._tenants.search_tenant(op.namespace_prefix)
        check_filter(op.filter)
        prefix = tuple(op.namespace_prefix)
        store = self._stores(tenant)
        candidates: dict[str, Memory] = {}
        for memory in store.memories():  # oldest first
            if ITEM_KEY not in memory.metadata or self._omitted(memory, now):
                continue
            item = _item(memory)
            if item.namespace[: len(prefix)] == prefix and matches(item.value, op.filter):
                candidates[memory.id] = memory
        scores: dict[str, float] = {}
        if not op.query:
            kept = list(candidates)[op.offset : op.offset + op.limit]
        else:
            scores = self._items.similarities(tenant, list(candidates), op.query)
            # Best field first (ties: the oldest put first); as InMemoryStore does, what has no
            # vector fills a page the scored items leave short, unscored.
            ranked = sorted(scores, key=lambda memory_id: -scores[memory_id])
            kept = ranked[op.offset : op.offset + op.limit]
            unscored = [m for m in candidates if m not in scores]
            kept += unscored[: op.limit - len(kept)]
        if op.refresh_ttl:
            for memory_id in kept:
                self._lease(candidates[memory_id], now, leases)
        return [_scored(_item(candidates[m]), scores.get(m)) for m in kept]

    def _list_namespaces(self, op: ListNamespacesOp, now: datetime) -> list[tuple[str, ...]]:
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
                if ITEM_NAMESPACE in memory.metadata and not self._omitted(memory, now):
                    namespace = tuple(json.loads(memory.metadata[ITEM_NAMESPACE]))
                    if all(_namespace_matches(c, namespace) for c in conditions):
                        found.add(namespace)
        if op.max_depth is not None:
            found = {namespace[: op.max_depth] for namespace in found}
        return sorted(found)[op.offset : op.offset + op.limit]

    def _omitted(self, memory: Memory, now: datetime) -> bool:
        """Whether a read leaves the item out: lapsed, and TTLConfig's `omit_expired` set."""
        return bool((self.ttl_config or {}).get("omit_expired")) and _lapsed(memory, now)

    def _lease(self, memory: Memory, now: datetime, leases: Leases) -> None:
        """Note a refresh of the item's TTL (sent once the batch's reads are done); an item
        without a TTL, or one already lapsed, is not refreshed."""
        ttl = memory.metadata.get(ITEM_TTL)
        if ttl is None or _lapsed(memory, now):
            return
        deadline = now + timedelta(minutes=float(ttl))
        leases.setdefault(validate_tenant(memory.tenant), []).append(
            (memory.id, memory.event_id, deadline)
        )

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
            texts=tuple(text[: settings.max_record_chars] for text in self._texts(op)),
            recorded_at=now,
            importance=settings.default_importance,
            embedding_model=self._stores(tenant).embedding_model,
            ttl_minutes=op.ttl,
        )

    def _texts(self, op: PutOp) -> list[str]:
        if op.index is False:
            return []
        paths = self._fields if op.index is None else tuple(op.index)
        assert op.value is not None  # a delete has no texts
        return [text for path in paths for text in get_text_at_path(op.value, path)]

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


def _fields(index: IndexConfig | None) -> tuple[str, ...]:
    fields = tuple((index or {}).get("fields") or ("$",))
    if not all(isinstance(path, str) and path for path in fields):
        raise InvalidInputError(
            f"index fields are value paths such as 'text' or 'details.summary' ('$': the "
            f"whole value), got {fields!r}"
        )
    return fields


def _lapsed(memory: Memory, now: datetime) -> bool:
    return memory.expires_at is not None and memory.expires_at <= now
