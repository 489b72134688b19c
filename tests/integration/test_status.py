"""Waiting on the projection on the real Redis: what a wait reads while it waits."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import redis

from memstream import Settings, TurnCompleted
from memstream.projections import status
from memstream.projections.connection import redis_client
from memstream.projections.schema import Keyspace
from memstream.projections.status import ProjectionStatus

pytestmark = pytest.mark.integration


def turns(tenants: int) -> list[TurnCompleted]:
    run = uuid.uuid4().hex[:8]
    return [
        TurnCompleted(f"wait-{run}-{n}", "t", run, 0, "q", "a", datetime.now(UTC), 0.5, "m@1")
        for n in range(tenants)
    ]


def reading(
    client: redis.Redis, after_each: Callable[[list[int]], None] | None = None
) -> list[int]:
    """The markers each of `client`'s reads asked for, one count a read, as the wait makes
    them; `after_each(reads)` runs once each read has been answered."""
    reads: list[int] = []
    pipeline = client.pipeline

    def counted(*args: Any, **kwargs: Any) -> redis.client.Pipeline:
        pipe = pipeline(*args, **kwargs)
        execute, hexists = pipe.execute, pipe.hexists
        asked = [0]

        def marker(*a: Any) -> Any:
            asked[0] += 1
            return hexists(*a)

        def answered(*a: Any, **k: Any) -> Any:
            replies = execute(*a, **k)
            reads.append(asked[0])
            if after_each is not None:
                after_each(reads)
            return replies

        pipe.hexists, pipe.execute = marker, answered  # type: ignore[method-assign,assignment]
        return pipe

    client.pipeline = counted  # type: ignore[method-assign]
    return reads


def test_a_wait_reads_the_last_event_alone_until_it_is_applied_then_every_tenant_again(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(status, "_READ_ALL_S", 3600.0)  # no timed read of everyone here
    keys = Keyspace(f"{settings.namespace}-wait")
    events = turns(5)
    client = redis_client(settings.redis)

    def apply_the_last(reads: list[int]) -> None:
        if len(reads) == 1:  # after the first read of everyone: the last event alone lands
            last = events[-1]
            client.hset(keys.applied(last.tenant), last.id, "{}")

    reads = reading(client, apply_the_last)
    pending = ProjectionStatus(client, keys).wait_applied(events, timeout_s=2.0)

    # The last event applied did not end the wait: everyone was read again, and the four
    # others are still pending.
    assert pending == events[:4]
    assert reads[:3] == [5, 1, 5], reads
    assert set(reads[3:]) == {1}, reads  # then the last pending one alone, poll after poll


def test_a_wait_returns_once_every_tenant_is_applied_and_reports_them_as_they_land(
    settings: Settings,
) -> None:
    keys = Keyspace(f"{settings.namespace}-wait")
    events = turns(4)
    client = redis_client(settings.redis)

    landing = events[::-1]  # the last published first

    def apply_one_a_read(reads: list[int]) -> None:
        # One event lands after each read: every one of them must be seen applied before the
        # wait returns.
        if len(reads) <= len(landing):
            event = landing[len(reads) - 1]
            client.hset(keys.applied(event.tenant), event.id, "{}")

    reading(client, apply_one_a_read)
    ticks: list[tuple[int, int]] = []
    pending = ProjectionStatus(client, keys).wait_applied(
        events, timeout_s=60, tick=lambda done, of: ticks.append((done, of))
    )

    assert pending == []
    assert ticks[-1] == (4, 4)
    assert all(of == 4 for _, of in ticks)
    assert [done for done, _ in ticks] == sorted(done for done, _ in ticks)
