"""The filters of API search render to exact RediSearch clauses, next to the tenant's TAG."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memstream import MemoryType
from memstream.errors import InvalidInputError
from memstream.memory.search import SearchFilter
from memstream.projections.recall import render_filter


def test_only_the_tenant_when_nothing_else_is_asked() -> None:
    assert render_filter(SearchFilter("acme")) == "@tenant_tag:{61636d65}"


def test_threads_types_and_time_render_as_clauses() -> None:
    where = SearchFilter(
        "acme",
        threads=("a", "b"),
        not_threads=("c",),
        memory_types=(MemoryType.USER_FACT,),
        not_memory_types=(MemoryType.TASK,),
        since=datetime(2026, 1, 1, tzinfo=UTC),
    )
    assert render_filter(where) == (
        "@tenant_tag:{61636d65} @thread_tag:{61|62} -@thread_tag:{63} "
        "@memory_type:{user\\_fact} -@memory_type:{task} @timestamp:[1767225600.0 +inf]"
    )


def test_thread_ids_travel_as_hex_so_no_id_is_syntax() -> None:
    hostile = "} | @tenant_tag:{x"
    rendered = render_filter(SearchFilter("acme", threads=(hostile,)))
    assert rendered == f"@tenant_tag:{{61636d65}} @thread_tag:{{{hostile.encode().hex()}}}"


def test_an_empty_session_id_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="empty session"):
        SearchFilter("acme", threads=("",))
