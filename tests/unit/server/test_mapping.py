"""AMS records and filters onto memstream's tenants, threads, types and filters (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memstream import MemoryType
from memstream.errors import ForbiddenError, InvalidInputError, LimitExceededError
from memstream.memory.codec import decode_event, encode_event
from memstream.memory.events import memories_of
from memstream.memory.model import EXTRACTION_STRATEGY, RecalledMemory
from memstream.server.api_keys import Principal
from memstream.server.mapping import Scoping, recency_order
from memstream.server.models import (
    ForgetPolicy,
    ForgetRequest,
    MemoryRecord,
    MemoryTypeEnum,
    SearchRequest,
)
from memstream.server.service import _chosen

AT = datetime(2026, 5, 8, 12, 0, tzinfo=UTC)
SCOPING = Scoping(tenant_field="namespace", default_importance=0.5, max_record_chars=100)


def _record(**fields: object) -> MemoryRecord:
    return MemoryRecord.model_validate({"id": "m-1", "text": "Tea, no sugar", **fields})


def test_a_record_is_saved_under_its_own_id_in_the_tenant_and_reads_back() -> None:
    record = _record(
        session_id="monday",
        user_id="u-7",
        namespace="acme",
        created_at=AT,
        topics=["drinks"],
        entities=["tea"],
        event_date=AT - timedelta(days=1),
        memory_type="episodic",
        metadata={"source": "chat"},
    )
    event = SCOPING.saved(record, "acme", "model-x")
    (memory,) = memories_of(event)
    assert (memory.id, memory.tenant, memory.thread) == ("m-1", "acme", "monday")
    assert memory.memory_type == MemoryType.CUSTOM and memory.timestamp == AT
    assert decode_event(encode_event(event)) == event
    back = SCOPING.record(memory)
    assert back["namespace"] == "acme" and back["user_id"] == "u-7"
    assert back["topics"] == ["drinks"] and back["entities"] == ["tea"]
    assert back["memory_type"] == MemoryTypeEnum.EPISODIC
    assert back["event_date"] == AT - timedelta(days=1)
    assert back["metadata"] == {"source": "chat"}  # the `ams.` keys stay inside


def test_pinned_means_evicted_last_unless_importance_is_given() -> None:
    assert SCOPING.saved(_record(pinned=True), "acme", "m").importance == 1.0
    assert SCOPING.saved(_record(pinned=True, importance=0.2), "acme", "m").importance == 0.2
    assert SCOPING.saved(_record(), "acme", "m").importance == 0.5


def test_same_record_same_event_other_content_new_event() -> None:
    first = SCOPING.saved(_record(created_at=AT), "acme", "m")
    assert SCOPING.saved(_record(created_at=AT), "acme", "m").id == first.id
    changed = SCOPING.saved(_record(created_at=AT, text="Coffee"), "acme", "m")
    assert changed.id != first.id and changed.memory_id == first.memory_id
    assert SCOPING.saved(_record(created_at=AT), "globex", "m").id != first.id


def test_too_long_a_text_names_the_limit() -> None:
    with pytest.raises(LimitExceededError, match="MEMSTREAM_MAX_RECORD_CHARS=100"):
        SCOPING.saved(_record(text="x" * 101), "acme", "m")


@pytest.mark.parametrize("bad", ["a:b", "", "-lead", "x" * 129, "sp ace"])
def test_unusable_ids_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="id"):
        _record(id=bad)


def test_memstream_types_read_back_as_ams_types() -> None:
    kinds = {
        MemoryType.CONVERSATION: "message",
        MemoryType.USER_FACT: "semantic",
        MemoryType.KNOWLEDGE: "semantic",
        MemoryType.ENTITY: "semantic",
        MemoryType.TASK: "episodic",
        MemoryType.CUSTOM: "episodic",
    }
    for kind, ams in kinds.items():
        (memory,) = memories_of(SCOPING.saved(_record(), "acme", "m"))
        assert SCOPING.record(replace(memory, memory_type=kind))["memory_type"] == ams


def test_a_search_plan_filters_on_the_index_what_it_can() -> None:
    request = SearchRequest.model_validate(
        {
            "text": "tea",
            "session_id": {"in_": ["a", "b"], "ne": "b"},
            "memory_type": {"eq": "semantic"},
            "created_at": {"gte": "2026-01-01T00:00:00Z", "lt": "2026-06-01T00:00:00Z"},
        }
    )
    plan = SCOPING.plan("acme", request)
    assert plan.where.threads == ("a", "b") and plan.where.not_threads == ("b",)
    assert set(plan.where.memory_types) == {
        MemoryType.USER_FACT,
        MemoryType.ENTITY,
        MemoryType.KNOWLEDGE,
    }
    assert plan.where.since == datetime(2026, 1, 1, tzinfo=UTC)
    assert plan.where.until == datetime(2026, 6, 1, tzinfo=UTC) - timedelta(microseconds=1)
    assert plan.keep is None and not plan.impossible


def test_what_the_index_cannot_filter_is_kept_by_a_predicate() -> None:
    request = SearchRequest.model_validate(
        {"user_id": {"eq": "u-7"}, "topics": {"all": ["drinks"]}, "event_date": {"lte": AT}}
    )
    plan = SCOPING.plan("acme", request)
    assert plan.keep is not None
    kept = _record(user_id="u-7", topics=["drinks", "x"], event_date=AT - timedelta(days=1))
    (memory,) = memories_of(SCOPING.saved(kept, "acme", "m"))
    assert plan.keep(memory)
    for other in (
        _record(user_id="u-8", topics=["drinks"], event_date=AT),
        _record(user_id="u-7", topics=["x"], event_date=AT),
        _record(user_id="u-7", topics=["drinks"], event_date=AT + timedelta(days=1)),
        _record(user_id="u-7", topics=["drinks"]),
    ):
        (memory,) = memories_of(SCOPING.saved(other, "acme", "m"))
        assert not plan.keep(memory)


def test_startswith_keeps_the_values_with_that_prefix() -> None:
    """AMS 0.15's `startswith` on a tag filter: a prefix of the session, the user, a topic."""
    request = SearchRequest.model_validate(
        {
            "session_id": {"startswith": "work:"},
            "user_id": {"startswith": "team-"},
            "topics": {"startswith": "dri"},
        }
    )
    plan = SCOPING.plan("acme", request)
    assert plan.keep is not None and not plan.impossible
    fits = _record(session_id="work:42", user_id="team-a", topics=["x", "drinks"])
    (memory,) = memories_of(SCOPING.saved(fits, "acme", "m"))
    assert plan.keep(memory)
    for other in (
        _record(session_id="home:42", user_id="team-a", topics=["drinks"]),
        _record(session_id="work:42", user_id="solo", topics=["drinks"]),
        _record(session_id="work:42", user_id="team-a", topics=["food"]),
        _record(session_id="work:42", topics=["drinks"]),
    ):
        (memory,) = memories_of(SCOPING.saved(other, "acme", "m"))
        assert not plan.keep(memory)
    # On the tenant's own field: a prefix of another tenant's name matches nothing.
    assert SCOPING.plan(
        "acme", SearchRequest.model_validate({"namespace": {"startswith": "gl"}})
    ).impossible
    assert not SCOPING.plan(
        "acme", SearchRequest.model_validate({"namespace": {"startswith": "ac"}})
    ).impossible
    with pytest.raises(ValueError, match="startswith"):
        SearchRequest.model_validate({"topics": {"startswith": ""}})


def test_filters_that_cannot_match_are_known_before_searching() -> None:
    for impossible in (
        {"session_id": {"all": ["a", "b"]}},
        {"session_id": {"eq": "a", "in_": ["b"]}},
    ):
        assert SCOPING.plan("acme", SearchRequest.model_validate(impossible)).impossible


def test_the_extraction_strategy_filter_reads_each_memorys_strategy() -> None:
    """A memory stored whole is "discrete"; an extracted one names the strategy that made it."""
    (stored,) = memories_of(SCOPING.saved(_record(), "acme", "m"))
    extracted = replace(stored, metadata={EXTRACTION_STRATEGY: "summary"})
    plan = SCOPING.plan(
        "acme", SearchRequest.model_validate({"extraction_strategy": {"eq": "summary"}})
    )
    assert plan.keep is not None and not plan.impossible
    assert plan.keep(extracted) and not plan.keep(stored)
    assert SCOPING.record(stored)["extraction_strategy"] == "discrete"
    assert SCOPING.record(extracted)["extraction_strategy"] == "summary"


def test_a_tenant_key_acts_for_its_tenant_only_and_an_admin_names_one() -> None:
    assert Principal("acme").tenant_for([None, "acme"], "namespace") == "acme"
    with pytest.raises(ForbiddenError):
        Principal("acme").tenant_for(["globex"], "namespace")
    assert Principal(None).tenant_for(["globex", None], "namespace") == "globex"
    for named in ([], ["a", "b"]):
        with pytest.raises(InvalidInputError, match="exactly one tenant"):
            Principal(None).tenant_for(named, "namespace")
    by_user = Scoping(tenant_field="user_id")
    event = by_user.saved(_record(user_id="u-7", namespace="ns"), "u-7", "m")
    (memory,) = memories_of(event)
    assert by_user.record(memory)["namespace"] == "ns" and memory.tenant == "u-7"


def test_forget_policies_choose_by_age_and_budget_never_pinned() -> None:
    now = AT
    memories = [
        m
        for i, (age, pinned) in enumerate([(40, False), (20, False), (10, True), (1, False)])
        for m in memories_of(
            SCOPING.saved(
                _record(id=f"m{i}", created_at=now - timedelta(days=age), pinned=pinned),
                "acme",
                "m",
            )
        )
    ]

    def chosen(**policy: object) -> list[str]:
        request = ForgetRequest(policy=ForgetPolicy.model_validate(policy))
        return _chosen(memories, request, now, SCOPING)

    assert chosen(max_age_days=30) == ["m0"]
    assert chosen(budget=1) == ["m0", "m1"]  # the newest unpinned one stays
    assert chosen(budget=0) == ["m0", "m1", "m3"]
    assert chosen(budget=0, memory_type_allowlist=["message"]) == []
    request = ForgetRequest(policy=ForgetPolicy(budget=0), pinned_ids=["m3"])
    assert _chosen(memories, request, now, SCOPING) == ["m0", "m1"]


def test_ams_recency_reorders_the_page_only_when_the_request_asks_for_it() -> None:
    def hit(name: str, score: float, days: float) -> RecalledMemory:
        memory = memories_of(SCOPING.saved(_record(id=name), "acme", "m"))[0]
        return RecalledMemory(replace(memory, timestamp=AT - timedelta(days=days)), score)

    old_best, new_worse = hit("old", 0.9, 300), hit("new", 0.7, 0)
    page = [old_best, new_worse]

    def order(**fields: object) -> list[str]:
        request = SearchRequest.model_validate({"text": "tea", **fields})
        return [h.memory.id for h in recency_order(request, page, AT)]

    assert order() == ["old", "new"]  # memstream's ranking, recency weighed in already
    # AMS's defaults: 0.8 x similarity + 0.2 x recency; a year-old memory has little left.
    assert order(recency_boost=True) == ["new", "old"]
    assert order(server_side_recency=True) == ["new", "old"]
    assert order(recency_boost=False, recency_recency_weight=0.9) == ["old", "new"]
    assert order(recency_semantic_weight=1.0, recency_recency_weight=0.0) == ["old", "new"]
    # Scores stay as ranked, as AMS leaves them.
    request = SearchRequest.model_validate({"text": "tea", "recency_boost": True})
    assert [h.score for h in recency_order(request, page, AT)] == [0.7, 0.9]
