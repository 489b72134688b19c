"""How agent-memory-server's records and filters map onto memstream's tenants, threads and
memories, in both directions. Pure: no I/O.

- The tenant is one of AMS's scoping fields, `namespace` or `user_id`
  (MEMSTREAM_SERVER_TENANT_FIELD); the other is kept with the memory and filtered on.
- `session_id` is the thread.
- Memory types: AMS `message` is a conversation memory, `semantic` a fact about the user,
  `episodic` a custom memory. memstream's other types read back as `semantic` (entity,
  knowledge) or `episodic` (task), so every stored memory has an AMS type.
- `created_at` is the memory's timestamp (eviction order, time filters, the date words
  recall searches); `pinned` without an explicit `importance` means importance 1, so a
  pinned memory is evicted last. Topics, entities, `event_date`, `extracted_from` and the
  non-tenant scoping field travel in the memory's metadata under the reserved `ams.` prefix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memstream.errors import InvalidInputError, LimitExceededError
from memstream.memory.events import MemorySaved
from memstream.memory.model import (
    ENTITIES,
    EVENT_DATE,
    EXTRACTED_FROM,
    EXTRACTION_STRATEGY,
    RESERVED_PREFIX,
    TOPICS,
    Memory,
    MemoryType,
    RecalledMemory,
)
from memstream.memory.moments import as_utc
from memstream.memory.search import SearchFilter
from memstream.server.models import (
    DateFilter,
    MemoryRecord,
    MemoryTypeEnum,
    MemoryTypeFilter,
    SearchRequest,
    TagFilter,
)

__all__ = ["Scoping", "SearchPlan", "recency_order", "vector_weight"]

_PINNED = "ams.pinned"

_TO_MEMSTREAM = {
    MemoryTypeEnum.MESSAGE: MemoryType.CONVERSATION,
    MemoryTypeEnum.SEMANTIC: MemoryType.USER_FACT,
    MemoryTypeEnum.EPISODIC: MemoryType.CUSTOM,
}
_TO_AMS = {t: MemoryTypeEnum(t.kind) for t in MemoryType}


def _ams_type(raw: str) -> MemoryTypeEnum:
    try:
        return MemoryTypeEnum(raw)
    except ValueError:
        known = ", ".join(t.value for t in MemoryTypeEnum)
        raise InvalidInputError(f"memory_type {raw!r} is not one of {known}") from None


def _memstream_types(ams: Iterable[str]) -> tuple[MemoryType, ...]:
    wanted = {_ams_type(raw) for raw in ams}
    return tuple(sorted(t for t, a in _TO_AMS.items() if a in wanted))


@dataclass(frozen=True, slots=True)
class _Choice:
    """A string filter as sets: values allowed (None: any) and values refused."""

    allowed: frozenset[str] | None
    refused: frozenset[str]

    @classmethod
    def of(cls, tag: TagFilter | MemoryTypeFilter, *, single_valued: bool) -> _Choice:
        allowed: set[str] | None = None

        def narrow(values: Iterable[str]) -> None:
            nonlocal allowed
            allowed = set(values) if allowed is None else allowed & set(values)

        if tag.eq is not None:
            narrow([tag.eq])
        for values in (tag.any, tag.in_):
            if values is not None:
                narrow(values)
        if tag.all is not None and single_valued:
            # A memory has one value of the field: `all` of two or more matches nothing.
            narrow(tag.all if len(set(tag.all)) == 1 else [])
        refused = {v for v in (tag.ne, tag.not_eq) if v is not None}
        refused.update(tag.not_in or ())
        refused.update(tag.none or ())
        return cls(None if allowed is None else frozenset(allowed), frozenset(refused))

    def admits(self, value: str | None) -> bool:
        if self.allowed is not None and value not in self.allowed:
            return False
        return value not in self.refused


def _range(dates: Sequence[DateFilter | None]) -> tuple[datetime | None, datetime | None]:
    """The tightest [since, until] all date filters allow (AMS's gt/lt are to the microsecond)."""
    lows: list[datetime] = []
    highs: list[datetime] = []
    tick = timedelta(microseconds=1)
    for date in dates:
        if date is None:
            continue
        lows += [d for d in (date.gte, date.eq) if d is not None]
        highs += [d for d in (date.lte, date.eq) if d is not None]
        if date.gt is not None:
            lows.append(date.gt if date.gt == datetime.max.replace(tzinfo=UTC) else date.gt + tick)
        if date.lt is not None:
            highs.append(date.lt if date.lt == datetime.min.replace(tzinfo=UTC) else date.lt - tick)
        if date.between is not None:
            lows.append(date.between[0])
            highs.append(date.between[1])
    return (max(map(as_utc, lows)) if lows else None, min(map(as_utc, highs)) if highs else None)


def _in_range(at: datetime | None, window: tuple[datetime | None, datetime | None]) -> bool:
    since, until = window
    if at is None:
        return since is None and until is None
    return (since is None or at >= since) and (until is None or at <= until)


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """A search request as memstream runs it: what the index filters, what is filtered after
    (None: nothing), and whether no memory can match at all."""

    where: SearchFilter
    keep: Callable[[Memory], bool] | None
    impossible: bool
    vector_weight: float | None = None  # the hybrid fusion's, when `hybrid_alpha` is sent
    scorer: str | None = None  # the keyword mode's, when `text_scorer` is sent


@dataclass(frozen=True, slots=True)
class Scoping:
    """The mapping, configured: which field names the tenant, and the limits records obey."""

    tenant_field: str = "namespace"
    default_importance: float = 0.5
    max_record_chars: int = 8_000

    @property
    def other_field(self) -> str:
        return "user_id" if self.tenant_field == "namespace" else "namespace"

    @property
    def _other_key(self) -> str:
        return f"{RESERVED_PREFIX}{self.other_field}"

    def named(self, namespace: str | None, user_id: str | None) -> str | None:
        """The tenant a request's `namespace` and `user_id` name, by the tenant field."""
        return namespace if self.tenant_field == "namespace" else user_id

    def tenant_named(self, record: MemoryRecord) -> str | None:
        value: str | None = getattr(record, self.tenant_field)
        return value

    def tenants_filtered(self, tag: TagFilter | None) -> tuple[set[str], set[str]]:
        """The tenants a filter on the tenant field names, and those it excludes."""
        if tag is None:
            return set(), set()
        named = {tag.eq} if tag.eq is not None else set()
        for values in (tag.any, tag.in_, tag.all):
            named.update(values or ())
        excluded = {v for v in (tag.ne, tag.not_eq) if v is not None}
        excluded.update(tag.not_in or ())
        excluded.update(tag.none or ())
        return named, excluded

    def saved(
        self,
        record: MemoryRecord,
        tenant: str,
        embedding_model: str,
        *,
        edited: Memory | None = None,
        reserved: Mapping[str, str] | None = None,
    ) -> MemorySaved:
        """The event that saves `record` for `tenant`; when it edits a stored memory, that
        memory's role and memstream type stay unless the edit changed the AMS type.
        `reserved`: `ams.` metadata an API other than AMS's keeps (server.stores)."""
        if len(record.text) > self.max_record_chars:
            raise LimitExceededError(
                "max_record_chars",
                f"memory {record.id!r} has {len(record.text)} characters, more than "
                f"MEMSTREAM_MAX_RECORD_CHARS={self.max_record_chars}; split it or shorten it",
            )
        metadata = dict(record.metadata)
        other = getattr(record, self.other_field)
        extras: Mapping[str, object] = {
            self._other_key: other,
            TOPICS: record.topics,
            ENTITIES: record.entities,
            EXTRACTED_FROM: record.extracted_from,
        }
        for key, value in extras.items():
            if value is not None:
                metadata[key] = value if isinstance(value, str) else json.dumps(value)
        if record.event_date is not None:
            metadata[EVENT_DATE] = as_utc(record.event_date).astimezone(UTC).isoformat()
        if record.pinned:
            metadata[_PINNED] = "true"
        metadata.update(reserved or {})
        importance = record.importance
        if importance is None:
            importance = 1.0 if record.pinned else self.default_importance
        memory_type = _TO_MEMSTREAM[record.memory_type]
        if edited is not None and _TO_AMS[edited.memory_type] == record.memory_type:
            memory_type = edited.memory_type
        return MemorySaved(
            tenant=tenant,
            memory_id=record.id,
            thread=record.session_id or "",
            content=record.text,
            memory_type=memory_type,
            role=edited.role if edited is not None else "",
            saved_at=as_utc(record.created_at),
            importance=importance,
            embedding_model=embedding_model,
            metadata=metadata,
        )

    def record(self, memory: Memory) -> dict[str, object]:
        """The AMS record fields of a stored memory (any memory, however it was written)."""
        meta = memory.metadata
        event_date = meta.get(EVENT_DATE)
        return {
            "id": memory.id,
            "text": memory.content,
            "session_id": memory.thread or None,
            self.tenant_field: memory.tenant,
            self.other_field: meta.get(self._other_key),
            "created_at": memory.timestamp,
            "updated_at": memory.timestamp,
            "last_accessed": memory.timestamp,
            "pinned": meta.get(_PINNED) == "true",
            "topics": _list(meta.get(TOPICS)),
            "entities": _list(meta.get(ENTITIES)),
            "extracted_from": _list(meta.get(EXTRACTED_FROM)),
            "event_date": datetime.fromisoformat(event_date) if event_date else None,
            "memory_type": _TO_AMS[memory.memory_type],
            "extraction_strategy": _strategy(memory),
            "metadata": {k: v for k, v in meta.items() if not k.startswith(RESERVED_PREFIX)},
            "importance": memory.importance,
        }

    def plan(self, tenant: str, request: SearchRequest) -> SearchPlan:
        """Translate a search request's filters for one tenant."""
        impossible = False
        threads: frozenset[str] | None = None
        not_threads: frozenset[str] = frozenset()
        checks: list[Callable[[Memory], bool]] = []
        if request.session_id is not None:
            session = _Choice.of(request.session_id, single_valued=True)
            threads, not_threads = session.allowed, session.refused
            impossible |= threads is not None and not threads
            if request.session_id.startswith is not None:
                checks.append(_thread_prefix(request.session_id.startswith))
        types: tuple[MemoryType, ...] = ()
        not_types: tuple[MemoryType, ...] = ()
        if request.memory_type is not None:
            kind = _Choice.of(request.memory_type, single_valued=True)
            if kind.allowed is not None:
                types = _memstream_types(kind.allowed)
                impossible |= not types
            not_types = _memstream_types(kind.refused)
        since, until = _range([request.created_at, request.last_accessed])
        where = SearchFilter(
            tenant=tenant,
            threads=tuple(sorted(threads or ())),
            not_threads=tuple(sorted(not_threads)),
            memory_types=types,
            not_memory_types=not_types,
            since=since,
            until=until,
        )
        named = getattr(request, self.tenant_field)
        if named is not None and named.startswith is not None:
            impossible |= not tenant.startswith(named.startswith)
        other = getattr(request, self.other_field)
        if other is not None:
            scope = _Choice.of(other, single_valued=True)
            checks.append(lambda m: scope.admits(m.metadata.get(self._other_key)))
            if other.startswith is not None:
                checks.append(_prefix_check(other.startswith, self._other_key))
        for name, key in (("topics", TOPICS), ("entities", ENTITIES)):
            tag = getattr(request, name)
            if tag is not None:
                checks.append(_list_check(tag, key))
        if request.event_date is not None:
            window = _range([request.event_date])
            checks.append(lambda m: _in_range(_event_date(m), window))
        if request.extraction_strategy is not None:
            strategy = _Choice.of(request.extraction_strategy, single_valued=True)
            checks.append(lambda m: strategy.admits(_strategy(m)))
            if request.extraction_strategy.startswith is not None:
                start = request.extraction_strategy.startswith
                checks.append(lambda m: _strategy(m).startswith(start))
        keep = (lambda m: all(check(m) for check in checks)) if checks else None
        scorer = request.text_scorer if "text_scorer" in request.model_fields_set else None
        return SearchPlan(where, keep, impossible, vector_weight(request), scorer)


def vector_weight(request: SearchRequest) -> float | None:
    """The fusion's weight of meaning for AMS's `hybrid_alpha`, when the request sends one.

    AMS scores `alpha * vector + (1 - alpha) * text`; memstream's fusion scores
    `(text + a * cosine) / (1 + a)` (memory.ranking.fusion), the same blend for
    `a = alpha / (1 - alpha)`. Unsent, memstream's own tuned weight decides (its default, 4,
    is alpha 0.8; AMS's default alpha is 0.7)."""
    if "hybrid_alpha" not in request.model_fields_set:
        return None
    return request.hybrid_alpha / max(1.0 - request.hybrid_alpha, _ALPHA_FLOOR)


_ALPHA_FLOOR = 1e-6  # alpha 1 (meaning alone): a weight so large that words no longer count

# AMS's recency rerank: its fields, and the defaults of those a request leaves out.
_RECENCY = {
    "recency_semantic_weight": 0.8,
    "recency_recency_weight": 0.2,
    "recency_freshness_weight": 0.6,
    "recency_novelty_weight": 0.4,
    "recency_half_life_last_access_days": 7.0,
    "recency_half_life_created_days": 30.0,
}
_LN2 = math.log(2)


def recency_order(
    request: SearchRequest, hits: Sequence[RecalledMemory], now: datetime
) -> list[RecalledMemory]:
    """The page reordered as AMS's recency rerank orders it, when the request asks for that
    by sending one of its fields (or `server_side_recency`); else as ranked (memstream's
    ranking weighs recency already: MEMSTREAM_RECALL_RECENCY_WEIGHT). Scores stay as they
    were, as in AMS. A memory's last access is its time: memstream does not track reads."""
    asked = request.model_fields_set & {*_RECENCY, "recency_boost", "server_side_recency"}
    if not asked or request.recency_boost is False:
        return list(hits)
    weight = {name: getattr(request, name) for name in _RECENCY}
    w = {name: _RECENCY[name] if value is None else value for name, value in weight.items()}

    def combined(hit: RecalledMemory) -> float:
        days = max((now - hit.memory.timestamp).total_seconds() / 86_400, 0.0)
        fresh = math.exp(-_LN2 * days / max(w["recency_half_life_last_access_days"], 0.001))
        novel = math.exp(-_LN2 * days / max(w["recency_half_life_created_days"], 0.001))
        mix = w["recency_freshness_weight"] * fresh + w["recency_novelty_weight"] * novel
        recency = min(max(mix, 0.0), 1.0)
        return w["recency_semantic_weight"] * hit.score + w["recency_recency_weight"] * recency

    return sorted(hits, key=combined, reverse=True)


def _strategy(memory: Memory) -> str:
    # A memory stored whole (a turn, a saved record) is "discrete" in AMS's terms; an
    # extracted one names the strategy that derived it.
    return memory.metadata.get(EXTRACTION_STRATEGY, "discrete")


def _list(raw: str | None) -> list[str] | None:
    return None if raw is None else list(json.loads(raw))


def _event_date(memory: Memory) -> datetime | None:
    raw = memory.metadata.get(EVENT_DATE)
    return datetime.fromisoformat(raw) if raw else None


def _thread_prefix(prefix: str) -> Callable[[Memory], bool]:
    return lambda memory: memory.thread.startswith(prefix)


def _prefix_check(prefix: str, key: str) -> Callable[[Memory], bool]:
    def check(memory: Memory) -> bool:
        value = memory.metadata.get(key)
        return value is not None and value.startswith(prefix)

    return check


def _list_check(tag: TagFilter, key: str) -> Callable[[Memory], bool]:
    def check(memory: Memory) -> bool:
        values = set(_list(memory.metadata.get(key)) or ())
        if tag.startswith is not None and not any(v.startswith(tag.startswith) for v in values):
            return False
        wanted_any = [*(tag.any or ()), *(tag.in_ or ()), *([tag.eq] if tag.eq else [])]
        if wanted_any and not values.intersection(wanted_any):
            return False
        if tag.all and not values.issuperset(tag.all):
            return False
        refused = {*(tag.none or ()), *(tag.not_in or ())}
        refused.update(v for v in (tag.ne, tag.not_eq) if v is not None)
        return not values.intersection(refused)

    return check
