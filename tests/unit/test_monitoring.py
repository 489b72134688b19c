"""Monitoring notices: what applying an event announces, and their wire format."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from memstream.memory.events import MemoriesConsolidated, MemoryForgotten
from memstream.memory.model import MemoryType
from memstream.memory.monitoring import Consolidated, Evicted, Forgotten, encode_monitoring
from memstream.memory.ports import AppliedOutcome
from memstream.streams.projector import notices_of
from memstream.streams.replay import Progress

AT = datetime(2026, 5, 1, tzinfo=UTC)
FORGET = MemoryForgotten("acme", "r", AT, everything=True)
MERGE = MemoriesConsolidated("acme", ("a", "b"), "s", MemoryType.TASK, "t", AT, 0.5, "m")


def test_a_repeat_announces_nothing() -> None:
    assert notices_of(AppliedOutcome(FORGET, False, (), (), ("x",)), AT) == []


def test_forgets_consolidations_and_evictions_are_announced() -> None:
    assert notices_of(AppliedOutcome(FORGET, True, (), (), ("x",)), AT) == [
        Forgotten("acme", FORGET.id, ("x",), AT)
    ]
    skipped = AppliedOutcome(MERGE, True, (), (), skipped="members_missing", missing=("b",))
    assert notices_of(skipped, AT) == [
        Consolidated("acme", MERGE.id, ("a", "b"), (), False, ("b",), AT)
    ]
    done = AppliedOutcome(MERGE, True, ("s1",), ("old",), removed=("a", "b"))
    assert notices_of(done, AT) == [
        Consolidated("acme", MERGE.id, ("a", "b"), ("s1",), True, (), AT),
        Evicted("acme", MERGE.id, ("old",), AT),
    ]


def test_the_wire_format_is_versioned_json() -> None:
    body = json.loads(encode_monitoring(Evicted("acme", "e", ("m1",), AT)))
    assert body == {
        "type": "Evicted",
        "version": 1,
        "tenant": "acme",
        "event_id": "e",
        "memory_ids": ["m1"],
        "at": "2026-05-01T00:00:00+00:00",
    }


def test_progress_rate_and_time_left() -> None:
    progress = Progress(done=200, total=1000, elapsed_s=2.0)
    assert progress.rate == 100.0 and progress.remaining_s == 8.0
    assert Progress(0, 10, 0.0).remaining_s is None
