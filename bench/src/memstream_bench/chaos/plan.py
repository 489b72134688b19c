"""The faults of a chaos run, drawn from its seed before anything starts: what fails, how, for
how long, and which faults overlap. The same seed and length give the same plan, so a run that
found a defect is replayed by its seed (printed first).

A plan is a list of episodes run one after another; an episode is one fault, or two that
overlap (the second starts while the first holds). Kinds are drawn from a shuffled bag that
holds each kind once, so a short run meets every component before any repeats. The promises
the plan keeps by construction: never more than one broker down at once (RF=3 with
min.insync.replicas=2 survives one), never more than one Redis shard down at once (a shard
heals from its own files and the log), and never both faults of an episode on one component.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum

from memstream.errors import InvalidInputError

__all__ = ["Action", "Component", "Episode", "Fault", "Plan", "plan"]


class Component(StrEnum):
    BROKER = "broker"
    SHARD = "shard"
    WORKER = "worker"
    SERVER = "server"


class Action(StrEnum):
    KILL = "kill"  # SIGKILL, then started again once the hold is over
    PAUSE = "pause"  # SIGSTOP, SIGCONT once the hold is over: a hang, not a death
    BEHIND = "behind"  # every worker paused, then one killed and started: a restart while behind


@dataclass(frozen=True, slots=True)
class Fault:
    component: Component
    index: int  # which broker, shard, worker or server (0-based)
    action: Action
    hold_s: float  # how long it stays failed before it is started again or resumed
    after_s: float = 0.0  # the second fault of an episode: its start after the first's

    @property
    def kind(self) -> str:
        return f"{self.component}-{self.action}"

    def __str__(self) -> str:
        target = "workers" if self.action is Action.BEHIND else f"{self.component} {self.index}"
        return f"{self.action} {target} for {self.hold_s:.1f}s"


@dataclass(frozen=True, slots=True)
class Episode:
    faults: tuple[Fault, ...]
    calm_after_s: float  # quiet before the next episode


@dataclass(frozen=True, slots=True)
class Plan:
    seed: int
    calm_before_s: float  # the baseline: load and no fault
    episodes: tuple[Episode, ...]

    def describe(self) -> list[str]:
        lines = [f"seed {self.seed}: {self.calm_before_s:.0f}s without faults first"]
        for n, episode in enumerate(self.episodes, 1):
            first, *rest = episode.faults
            line = f"{n}. {first}"
            for fault in rest:
                line += f", and {fault.after_s:.1f}s in: {fault}"
            lines.append(line)
        return lines


_KINDS: tuple[tuple[Component, Action], ...] = (
    (Component.BROKER, Action.KILL),
    (Component.BROKER, Action.PAUSE),
    (Component.SHARD, Action.KILL),
    (Component.SHARD, Action.PAUSE),
    (Component.WORKER, Action.KILL),
    (Component.WORKER, Action.PAUSE),
    (Component.SERVER, Action.KILL),
    (Component.SERVER, Action.PAUSE),
    (Component.WORKER, Action.BEHIND),
)
_HOLD_S = (2.0, 8.0)
_CALM_S = (3.0, 8.0)
_OVERLAP = 0.35  # the share of episodes with a second fault
# A broker or shard started again takes longer than its hold (a JVM's start, a replayed AOF):
# what an episode costs, to fit a plan into the run's minutes.
_RESTART_S = {Component.BROKER: 25.0, Component.SHARD: 6.0}


def plan(
    seed: int,
    fault_s: float,
    *,
    brokers: int = 3,
    shards: int = 3,
    workers: int = 2,
    servers: int = 2,
    calm_before_s: float = 20.0,
) -> Plan:
    """Episodes drawn from `seed` whose holds, restarts and calms fill about `fault_s`."""
    counts = {
        Component.BROKER: brokers,
        Component.SHARD: shards,
        Component.WORKER: workers,
        Component.SERVER: servers,
    }
    if brokers < 3:
        raise InvalidInputError(
            f"chaos kills brokers and needs 3 of them (RF=3, min.insync=2), got {brokers}"
        )
    if min(counts.values()) < 1:
        raise InvalidInputError(f"chaos needs at least one of each component, got {counts}")
    if fault_s <= 0:
        raise InvalidInputError(f"a chaos run needs time for faults, got {fault_s}s")
    rng = random.Random(seed)
    bag: list[tuple[Component, Action]] = []

    def draw() -> tuple[Component, Action]:
        if not bag:
            bag.extend(_KINDS)
            rng.shuffle(bag)
        return bag.pop()

    def fault(component: Component, action: Action, after_s: float = 0.0) -> Fault:
        index = rng.randrange(counts[component])
        return Fault(component, index, action, round(rng.uniform(*_HOLD_S), 1), after_s)

    episodes: list[Episode] = []
    spent = 0.0
    while spent < fault_s:
        first = fault(*draw())
        faults = [first]
        if rng.random() < _OVERLAP:
            # Another component than the first's: two brokers or two shards down at once
            # would break what the cluster promises to survive.
            others = [k for k in _KINDS if k[0] is not first.component]
            second = fault(*rng.choice(others), after_s=round(rng.uniform(0.5, first.hold_s), 1))
            faults.append(second)
        calm = round(rng.uniform(*_CALM_S), 1)
        episodes.append(Episode(tuple(faults), calm))
        spent += max(f.after_s + f.hold_s + _RESTART_S.get(f.component, 1.0) for f in faults)
        spent += calm
    return Plan(seed, calm_before_s, tuple(episodes))
