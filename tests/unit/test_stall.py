"""A stalled stream is told from a quiet one, a busy projection and a fetch still on its way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection

import pytest

from memstream.memory.ports import Position
from memstream.streams.projector import RawMessage
from memstream.streams.stall import PROBE_OFFSETS, Stall, StallWatch, first_waiting

AFTER_S = 40.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def watch(clock: Clock) -> StallWatch:
    return StallWatch(AFTER_S, clock=clock)


def test_nothing_is_due_before_the_stream_has_been_quiet_for_after_s(
    watch: StallWatch, clock: Clock
) -> None:
    clock.now += AFTER_S - 1
    assert not watch.due
    clock.now += 1
    assert watch.due


def test_work_in_flight_is_never_a_stall_however_long_it_takes(
    watch: StallWatch, clock: Clock
) -> None:
    watch.began()  # a batch waiting on a Redis outage, or on a data key
    clock.now += 10 * AFTER_S
    assert not watch.due
    watch.ended()
    assert not watch.due  # the quiet is counted from when the work ended
    clock.now += AFTER_S
    assert watch.due


def test_records_still_waiting_a_look_later_are_a_stall(watch: StallWatch, clock: Clock) -> None:
    clock.now += AFTER_S
    assert watch.found({"ns.memory/1": 846}) is None  # maybe a fetch on its way: look again
    clock.now += AFTER_S / 4 - 1
    assert watch.found({"ns.memory/1": 846}) is None  # too soon to tell
    clock.now += 1
    stall = watch.found({"ns.memory/0": 12, "ns.memory/1": 846})
    assert stall == Stall({"ns.memory/1": 846}, AFTER_S + AFTER_S / 4)
    assert "ns.memory/1 from offset 846" in str(stall)
    assert "delivered nothing for 50s" in str(stall)


def test_records_delivered_between_two_looks_are_no_stall(watch: StallWatch, clock: Clock) -> None:
    clock.now += AFTER_S
    assert watch.found({"ns.memory/1": 846}) is None
    watch.began()  # the stream handed them over after all
    watch.ended()
    clock.now += AFTER_S / 4
    assert not watch.due
    clock.now += AFTER_S
    assert watch.found({"ns.memory/1": 900}) is None  # new records: a first look again
    clock.now += AFTER_S / 4
    assert watch.found({"ns.memory/1": 900}) is not None


def test_a_quiet_log_is_looked_at_again_only_after_another_after_s(
    watch: StallWatch, clock: Clock
) -> None:
    clock.now += AFTER_S
    assert watch.found({}) is None
    assert not watch.due  # an idle worker does not ask Kafka at every tick
    clock.now += AFTER_S
    assert watch.due


def test_records_past_the_ones_seen_before_are_looked_at_again(
    watch: StallWatch, clock: Clock
) -> None:
    clock.now += AFTER_S
    assert watch.found({"ns.memory/0": 5}) is None
    clock.now += AFTER_S / 4
    # Partition 0 was revoked and given back further on: what waits now was not seen waiting.
    assert watch.found({"ns.memory/0": 70}) is None
    clock.now += AFTER_S / 4
    assert watch.found({"ns.memory/0": 70}) == Stall({"ns.memory/0": 70}, AFTER_S * 1.5)


class EndedLog:
    """A topic whose partitions hold the offsets below `ends`, less `holes` (transaction
    markers)."""

    def __init__(self, ends: dict[int, int], holes: Collection[int] = ()) -> None:
        self.ends = ends
        self.holes = set(holes)
        self.reads: list[tuple[int, int, int]] = []

    async def committed(self, partitions: Collection[Position]) -> dict[str, int]:
        return {}

    async def read(
        self, topic: str, partition: int, first: int, last: int
    ) -> AsyncIterator[list[RawMessage]]:
        self.reads.append((partition, first, last))
        end = min(last + 1, self.ends[partition])
        offsets = [o for o in range(first, end) if o not in self.holes]
        for at in range(0, len(offsets), 2):  # in chunks, as a fetch returns them
            yield [RawMessage(topic, partition, o, b"k", b"v") for o in offsets[at : at + 2]]


def test_the_look_finds_the_first_record_past_the_projection() -> None:
    log = EndedLog({0: 10, 1: 850}, holes={846})
    found = asyncio.run(first_waiting(log, {"ns.memory/0": 9, "ns.memory/1": 845}))
    assert found == {"ns.memory/1": 847}  # partition 0 is all projected; 846 is a marker
    assert log.reads == [(0, 10, 9 + PROBE_OFFSETS), (1, 846, 845 + PROBE_OFFSETS)]


def test_markers_alone_past_the_projection_are_nothing_waiting() -> None:
    log = EndedLog({0: 14}, holes={10, 11, 12, 13})
    assert asyncio.run(first_waiting(log, {"ns.memory/0": 9})) == {}
