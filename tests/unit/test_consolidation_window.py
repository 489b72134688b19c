"""The consolidation window is pure time arithmetic."""

from datetime import UTC, datetime, timedelta

from memstream.memory.events import ConsolidationRequested
from memstream.streams.consolidation import ConsolidationWindow

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def request(
    tenant: str, thread: str, cutoff_days: int, min_count: int = 3, turn: int = 0
) -> ConsolidationRequested:
    return ConsolidationRequested(
        tenant, thread, "run", turn, T0 + timedelta(days=cutoff_days), min_count, T0
    )


def test_the_first_request_opens_a_window_that_closes_after_its_length() -> None:
    window = ConsolidationWindow(5.0)
    window.add(request("acme", "t1", 1), now=100.0)
    assert window.due(104.9) == []
    (pending,) = window.due(105.0)
    assert (pending.tenant, pending.thread, pending.due_at) == ("acme", "t1", 105.0)
    assert window.due(200.0) == [] and len(window) == 0


def test_requests_inside_a_window_merge_into_one_run() -> None:
    window = ConsolidationWindow(5.0)
    window.add(request("acme", "t1", 1, min_count=5), now=100.0)
    window.add(request("acme", "t2", 3, min_count=3, turn=1), now=103.0)
    window.add(request("acme", "t3", 2, min_count=4, turn=2), now=104.0)
    (pending,) = window.due(105.0)  # later requests do not push the window back
    assert pending.cutoff == T0 + timedelta(days=3)
    assert pending.min_count == 3
    assert pending.thread == "t3"


def test_tenants_have_windows_of_their_own() -> None:
    window = ConsolidationWindow(5.0)
    window.add(request("acme", "t1", 1), now=100.0)
    window.add(request("globex", "t1", 1), now=102.0)
    assert [p.tenant for p in window.due(106.0)] == ["acme"]
    assert [p.tenant for p in window.due(107.0)] == ["globex"]


def test_an_erased_tenants_window_closes_without_consolidating() -> None:
    window = ConsolidationWindow(5.0)
    window.add(request("acme", "t1", 1), now=100.0)
    window.add(request("globex", "t1", 1), now=100.0)
    window.drop("acme")
    assert [p.tenant for p in window.due(106.0)] == ["globex"]
