"""The store API's pure parts: its filters on memories, its page tokens, its memory types and
its problem statuses (server/stores.py, server/errors.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memstream import MemoryType
from memstream.errors import InfrastructureError, InvalidInputError, MemoryNotFoundError
from memstream.memory.model import TOPICS, Memory
from memstream.memory.tenancy import validate_tenant
from memstream.server.errors import status_of
from memstream.server.mapping import Scoping
from memstream.server.models import MemoryTypeEnum
from memstream.server.store_models import (
    FilterConjunction,
    LongTermMemoryFilter,
    page_offset,
    page_token_at,
)
from memstream.server.stores import _memory_type, _plan

AT = datetime(2026, 5, 8, 12, 0, tzinfo=UTC)
TENANT = validate_tenant("acme")


def _memory(memory_id: str, thread: str = "", **metadata: str) -> Memory:
    return Memory(
        id=memory_id,
        tenant=TENANT,
        content=memory_id,
        memory_type=MemoryType.USER_FACT,
        thread=thread,
        timestamp=AT,
        importance=0.5,
        event_id=memory_id,
        metadata=metadata,
    )


MEMORIES = [
    _memory("a", "s-1", **{"ams.user_id": "alice", TOPICS: json.dumps(["Deploys"])}),
    _memory("b", "s-2", **{"ams.user_id": "bob", "ams.namespace": "infra"}),
    _memory("c", "", **{"ams.attributes": json.dumps({"team": "x", "n": 2, "ok": True})}),
]


def _kept(filter_: dict[str, object], op: FilterConjunction = FilterConjunction.ALL) -> list[str]:
    given = LongTermMemoryFilter.model_validate(filter_)
    _, keep = _plan(TENANT, given, op, Scoping().record)
    return [m.id for m in MEMORIES if keep is None or keep(m)]


def test_each_filter_selects_what_it_names() -> None:
    assert _kept({"ownerId": {"eq": "alice"}}) == ["a"]
    assert _kept({"ownerId": {"ne": "alice"}}) == ["b", "c"]
    assert _kept({"sessionId": {"in": ["s-1", "s-2"]}}) == ["a", "b"]
    assert _kept({"topics": {"eq": "deploys"}}) == ["a"]  # topics match in any case
    assert _kept({"namespace": {"eq": "INFRA"}}) == ["b"]
    assert _kept({"unnamespaced": True}) == ["a", "c"]
    assert _kept({"memoryType": {"eq": "SEMANTIC"}}) == ["a", "b", "c"]
    assert _kept({"memoryType": {"eq": "episodic"}}) == []
    assert _kept({"attributes": {"n": {"number": 2}, "ok": {"boolean": True}}}) == ["c"]
    assert _kept({"attributes": {"n": {"boolean": True}}}) == []  # a number is not a boolean
    assert _kept({"createdAt": {"gt": AT.isoformat()}}) == []
    assert _kept({"createdAt": {"gte": AT.isoformat()}}) == ["a", "b", "c"]


def test_all_needs_every_condition_and_any_one_of_them() -> None:
    either = {"ownerId": {"eq": "alice"}, "namespace": {"eq": "infra"}}
    assert _kept(either) == []
    assert _kept(either, FilterConjunction.ANY) == ["a", "b"]
    # unnamespaced is always one more condition, whatever the conjunction.
    assert _kept({"ownerId": {"eq": "bob"}, "unnamespaced": True}, FilterConjunction.ANY) == []


def test_all_of_filter_pushes_sessions_and_time_into_the_index() -> None:
    given = LongTermMemoryFilter.model_validate(
        {"sessionId": {"eq": "s-1"}, "createdAt": {"gte": AT.isoformat()}}
    )
    where, _ = _plan(TENANT, given, FilterConjunction.ALL, Scoping().record)
    assert (where.threads, where.since, where.until) == (("s-1",), AT, None)
    where, _ = _plan(TENANT, given, FilterConjunction.ANY, Scoping().record)
    assert (where.threads, where.since) == ((), None)


def test_unnamespaced_with_a_namespace_filter_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="unnamespaced"):
        _kept({"unnamespaced": True, "namespace": {"eq": "infra"}})


def test_page_tokens_round_trip_and_a_forged_one_is_refused() -> None:
    assert page_offset(None) == 0
    assert page_offset(page_token_at(40)) == 40
    for forged in ("garbage", "e30=", page_token_at(-1)):
        with pytest.raises(InvalidInputError, match="pageToken"):
            page_offset(forged)


def test_memory_types_in_any_case_and_an_unknown_one_named() -> None:
    assert _memory_type(None) is MemoryTypeEnum.SEMANTIC
    assert _memory_type("Episodic") is MemoryTypeEnum.EPISODIC
    with pytest.raises(InvalidInputError, match="'recipe'"):
        _memory_type("recipe")


def test_the_store_api_says_400_and_424_where_ams_says_422_and_503() -> None:
    store = "/v1/stores/acme/long-term-memory"
    assert status_of(InvalidInputError("x"), store) == 400
    assert status_of(InvalidInputError("x"), "/v1/long-term-memory/") == 422
    assert status_of(InfrastructureError("x"), store) == 424
    assert status_of(InfrastructureError("x")) == 503
    assert status_of(MemoryNotFoundError("x"), store) == 404
