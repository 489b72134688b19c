"""The pure parts of `bench chaos`: the seeded fault plan, the history checker, what a read may
show, and which faults an operation ran under."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memstream_bench.chaos.faults import Injector, Window
from memstream_bench.chaos.history import History, Kind, check, marker, shown, token
from memstream_bench.chaos.plan import Action, Component, plan

from ..fuzzing import examples


def test_a_seed_gives_one_plan_and_another_seed_another() -> None:
    assert plan(7, 300.0) == plan(7, 300.0)
    assert plan(7, 300.0) != plan(8, 300.0)
    assert plan(7, 300.0).describe()[0].startswith("seed 7:")


def test_a_short_plan_meets_every_kind_of_fault_before_any_repeats() -> None:
    faults = [episode.faults[0] for episode in plan(3, 1000.0).episodes]
    first = [(f.component, f.action) for f in faults[:9]]
    assert len(set(first)) == 9, first
    assert {Component.BROKER, Component.SHARD, Component.WORKER, Component.SERVER} == {
        c for c, _ in first
    }
    assert any(a is Action.BEHIND for _, a in first)


@settings(max_examples=examples(200))
@given(seed=st.integers(0, 2**31), fault_s=st.floats(10.0, 2000.0))
def test_no_plan_takes_down_two_brokers_or_two_shards_at_once(seed: int, fault_s: float) -> None:
    drawn = plan(seed, fault_s)
    assert drawn.episodes
    for episode in drawn.episodes:
        components = [f.component for f in episode.faults]
        assert len(components) == len(set(components)), episode
        for fault in episode.faults:
            assert 2.0 <= fault.hold_s <= 8.0
            assert fault.index < (
                3 if fault.component in (Component.BROKER, Component.SHARD) else 2
            )
        if len(episode.faults) == 2:
            first, second = episode.faults
            assert 0 < second.after_s <= first.hold_s  # they overlap


def _history() -> History:
    history = History()
    history.wrote("a", (token("m", 1),), Kind.MEMORY, True)
    history.wrote("a", (token("m", 2),), Kind.MEMORY, False)  # never answered
    history.wrote("b", (token("u", 3), token("a", 3)), Kind.TURN, True)
    return history


A, B = {"a": [], "b": []}, {"a": "t000", "b": "t001"}


def text(tenant: str, n: int, kind: str = "m") -> str:
    return f"{marker(B[tenant])} something {token(kind, n)}"


def test_every_acknowledged_write_there_once_is_no_defect() -> None:
    memories = {"a": [text("a", 1)], "b": [text("b", 3, "u"), text("b", 3, "a")]}
    assert check(_history(), memories, B) == []
    # The write never answered may be there too, once.
    memories["a"].append(text("a", 2))
    assert check(_history(), memories, B) == []


def test_a_lost_a_doubled_and_a_foreign_memory_are_each_named() -> None:
    memories = {
        "a": [text("a", 2), text("a", 2), text("b", 9)],
        "b": [text("b", 3, "u"), text("b", 3, "a")],
    }
    defects = check(_history(), memories, B)
    assert any("#m0000001# of a was acknowledged and is lost" in d for d in defects), defects
    assert any("#m0000002# of a is there 2 times" in d for d in defects), defects
    assert any("holds a memory of ['t001']" in d for d in defects), defects
    assert len(defects) == 3


def test_forgotten_and_erased_memories_must_be_gone() -> None:
    history = _history()
    history.forgot("a", token("m", 1), True)
    history.erased_tenant("b")
    memories = {"a": [text("a", 1)], "b": [text("b", 3, "u")]}
    defects = check(history, memories, B)
    assert any("#m0000001# of a was forgotten and is there 1x" in d for d in defects)
    assert any("of erased tenant b is still there" in d for d in defects)
    # A forget never answered may or may not have happened.
    history.forgets[token("m", 1)] = ("a", False)
    assert not any("forgotten" in d for d in check(history, memories, B))


def test_what_the_workload_saw_is_a_defect() -> None:
    history = _history()
    history.saw("a search for a showed ['t001']'s memory")
    memories = {"a": [text("a", 1)], "b": [text("b", 3, "u"), text("b", 3, "a")]}
    assert check(history, memories, B) == ["a search for a showed ['t001']'s memory"]


def test_a_read_shows_no_foreign_marker_nothing_erased_and_nothing_gone() -> None:
    own = f"{marker('t000')} a note {token('m', 1)}"
    assert shown(own, "a", "t000", asked_at=10.0, erased_at=None, forgotten=[]) == []
    foreign = f"{marker('t001')} theirs"
    assert shown(foreign, "a", "t000", asked_at=10.0, erased_at=None, forgotten=[]) == [
        f"for a showed ['t001']'s memory: {foreign!r}"
    ]
    # Erased before the read was asked: anything shown is a defect; after: it may still show.
    assert shown(own, "a", "t000", asked_at=10.0, erased_at=9.0, forgotten=[])
    assert not shown(own, "a", "t000", asked_at=10.0, erased_at=11.0, forgotten=[])
    # A forgotten memory, once a read found it gone, never shows again; before that it may.
    gone = [(token("m", 1), 9.0)]
    assert shown(own, "a", "t000", asked_at=10.0, erased_at=None, forgotten=gone) == [
        "for a showed forgotten #m0000001#, gone before it was asked"
    ]
    assert not shown(own, "a", "t000", asked_at=8.0, erased_at=None, forgotten=gone)
    assert not shown(
        own, "a", "t000", asked_at=10.0, erased_at=None, forgotten=[(token("m", 1), None)]
    )


def test_an_operation_counts_under_every_fault_in_force_while_it_ran() -> None:
    injector = Injector(plan(1, 10.0), {}, say=lambda _: None)
    injector.windows += [Window("broker-kill", 10.0, 20.0), Window("shard-pause", 15.0, 30.0)]
    assert injector.kinds_over(0.0, 9.9) == set()
    assert injector.kinds_over(9.0, 11.0) == {"broker-kill"}  # started before, ran into it
    assert injector.kinds_over(16.0, 17.0) == {"broker-kill", "shard-pause"}
    assert injector.kinds_over(25.0, 40.0) == {"shard-pause"}
    assert injector.last_recovery == 30.0
