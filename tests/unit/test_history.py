"""The lineage fold: it holds what the in-process store (the projection's twin) holds after
the same events, notes every change to each memory, and forgets retroactively in its views."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from memstream.memory import history
from memstream.memory.bounds import Bounds
from memstream.memory.events import (
    MemoriesConsolidated,
    MemoryEvent,
    MemoryForgotten,
    MemorySaved,
    TenantErased,
    TurnCompleted,
    derive_id,
)
from memstream.memory.history import Change, TenantLog
from memstream.memory.inprocess import InProcessMemoryStore
from memstream.memory.model import MemoryType
from memstream.memory.ports import Position
from memstream.memory.provenance import Logged, provenance_of
from memstream.providers.minilm import MiniLMEmbedder

T0 = datetime(2026, 12, 1, tzinfo=UTC)
_EMBEDDER = MiniLMEmbedder()


def turn(n: int, importance: float = 0.5) -> TurnCompleted:
    return TurnCompleted(
        tenant="acme", thread="t1", run="r", turn=n, query=f"question {n}", answer=f"answer {n}",
        recorded_at=T0 + timedelta(minutes=n), importance=importance, embedding_model="m",
    )  # fmt: skip


def saved(memory_id: str, content: str, minute: int) -> MemorySaved:
    return MemorySaved(
        tenant="acme", memory_id=memory_id, thread="t2", content=content,
        memory_type=MemoryType.USER_FACT, role="user", saved_at=T0 + timedelta(minutes=minute),
        importance=0.9, embedding_model="m",
    )  # fmt: skip


def user_of(event: TurnCompleted) -> str:
    return derive_id(event.id, "user")


def logged(events: list[MemoryEvent]) -> list[Logged]:
    return [
        Logged(e, Position("memory", 0, offset), T0 + timedelta(hours=offset), e.id)
        for offset, e in enumerate(events)
    ]


def story() -> list[MemoryEvent]:
    turns = [turn(n, importance=0.1 * (n % 5)) for n in range(8)]
    summary = MemoriesConsolidated(
        tenant="acme", memory_ids=(user_of(turns[3]), user_of(turns[4])), summary="q3 and q4",
        memory_type=MemoryType.CONVERSATION, thread="t1", timestamp=T0 + timedelta(minutes=4),
        importance=0.9, embedding_model="m",
    )  # fmt: skip
    return [
        *turns,
        saved("fact-1", "the VPN is in Dublin", 20),
        saved("fact-1", "the VPN moved to Cork", 21),
        summary,
        turns[2],  # a redelivery: applied once
        MemoryForgotten(tenant="acme", request_id="f1", requested_at=T0, memory_ids=("fact-1",)),
        saved("fact-1", "written again after its forget", 22),  # tombstoned: never written
    ]


def test_every_prefix_holds_what_the_in_process_store_holds() -> None:
    events = story()
    log = TenantLog(logged(events), Bounds(10))
    store = InProcessMemoryStore("acme", _EMBEDDER, bounds=Bounds(10))
    for count, event in enumerate(events, start=1):
        store.write(event)
        # The fold keeps no provenance (an as-of view's records carry none yet).
        held = {m.id: dataclasses.replace(m, provenance=None) for m in store.memories()}
        assert log.state(count) == held, f"after event {count}"


def test_history_names_every_change_with_its_event_and_position() -> None:
    events = story()
    log = TenantLog(logged(events), Bounds(10))
    changes = [(t.change, t.position.offset) for t in log.history("fact-1")]
    assert changes == [(Change.RECORDED, 8), (Change.EDITED, 9), (Change.FORGOTTEN, 12)]
    summary_id = derive_id(events[10].id, "summary")
    member = log.history(user_of(turn(3)))
    assert [(t.change, t.related) for t in member][-1] == (Change.CONSOLIDATED, (summary_id,))
    recorded = log.history(summary_id)[0]
    assert recorded.change is Change.RECORDED and user_of(turn(3)) in recorded.related
    # 16 turn memories + 2 saves + a summary, bound 10: the least important went first.
    evicted = [i for i, ts in log.touches.items() if ts[-1].change is Change.EVICTED]
    assert evicted and all(log.history(i)[-1].event_type for i in evicted)
    assert log.history("never-had") == []


def test_a_view_drops_what_was_forgotten_later_and_a_forgotten_summary_takes_its_members() -> None:
    events = story()
    log = TenantLog(logged(events), Bounds(0))
    before_forget = log.cutoff(T0 + timedelta(hours=11))
    assert "fact-1" in log.state(before_forget)  # the rebuild held it then
    assert "fact-1" not in {m.id for m in log.view(before_forget)}  # gone from every view
    summary_id = derive_id(events[10].id, "summary")
    forget = MemoryForgotten(
        tenant="acme", request_id="f2", requested_at=T0, memory_ids=(summary_id,)
    )
    later = TenantLog(logged([*events, forget]), Bounds(0))
    early = {m.id for m in later.view(later.cutoff(T0 + timedelta(hours=9)))}
    assert user_of(turn(3)) not in early and user_of(turn(5)) in early


def test_diff_says_what_came_changed_and_went() -> None:
    events = story()
    log = TenantLog(logged(events), Bounds(0))
    found = {d.memory_id: d.change for d in log.diff(8, 13)}
    assert "fact-1" not in found  # recorded at 8 and forgotten by 13: neither there nor here
    assert found[derive_id(events[10].id, "summary")] == "added"
    assert found[user_of(turn(3))] == "consolidated"
    assert {d.memory_id: d.change for d in log.diff(9, 13)}["fact-1"] == "forgotten"
    edits = {d.memory_id: d.change for d in log.diff(9, 10)}
    assert edits == {"fact-1": "changed"}


def test_an_erasure_removes_everything_and_every_view_before_it() -> None:
    events = [*story()[:8], TenantErased(tenant="acme", request_id="e", requested_at=T0), turn(9)]
    log = TenantLog(logged(events), Bounds(0))
    assert log.history(user_of(turn(1)))[-1].change is Change.ERASED
    assert log.view(4) == []
    after = {m.id for m in log.view(len(events))}
    assert after == {user_of(turn(9)), derive_id(turn(9).id, "assistant")}


def test_checkpoints_and_a_log_extended_fold_as_one_fold_from_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = story()
    whole = TenantLog(logged(events), Bounds(6))
    monkeypatch.setattr(history, "CHECKPOINT_EVERY", 4)  # several checkpoints in 14 events
    split = logged(events)
    grown = TenantLog(split[:5], Bounds(6)).extended(split[5:9]).extended(split[9:])
    for count in range(len(events) + 1):
        assert grown.state(count) == whole.state(count), f"after event {count}"
        assert grown.view(count) == whole.view(count)
    assert grown.touches == whole.touches and grown.gone == whole.gone
    assert grown.diff(3, 12) == whole.diff(3, 12)
    shorter = TenantLog(split[:5], Bounds(6))
    shorter.extended(split[5:])
    assert len(shorter.events) == 5 and shorter.state(5) == whole.state(5)  # left as it was


def test_a_view_gives_each_memory_the_provenance_of_the_record_that_wrote_it() -> None:
    events = story()
    log = TenantLog(logged(events), Bounds(0))
    view = {m.id: m for m in log.view(len(events))}
    summary_id = derive_id(events[10].id, "summary")
    assert view[summary_id].provenance == provenance_of(events[10], "memory", 0, 10)
    # A redelivery (event 11 is turn 2 again) is not applied: its memories keep event 2's.
    assert view[user_of(turn(2))].provenance == provenance_of(events[2], "memory", 0, 2)
    assert all(
        m.provenance is not None and m.provenance.event_id == m.event_id for m in view.values()
    )
