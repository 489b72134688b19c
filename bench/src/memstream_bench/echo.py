"""`bench echo`: does echo control keep restatements out of a tenant's memory?

A simulation on the real middleware (recall and record, the configured embedder) over the
in-process store, whose writes are the projection's (`memories_of`, the same bound and eviction
order): each tenant tells the assistant its facts, then for hundreds of turns asks about
them; a scripted model answers by restating the first memory recall showed it in a set share
of its answers ("You told me: ..."), and says it does not know otherwise. The tenant's bound
is tight (a few memories per fact); half the facts are asked to be remembered (scored above
the questions), half said plainly (scored as a question and its answer are). At the end: the
share of stored memories that are restatements, how many facts are no longer held (and of
those, how many while a restatement of them is), and recall@5 of the facts (each fact's own
memory among the top 5 for its question). Echo control on against off, the same script
(same seed) for both.
Target with echo control on: restatements ≤ 5 % of stored memories, no fact evicted by its
own echoes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.config import Settings
from memstream.hooks import RecallConfig, RecordConfig, SemanticMemoryMiddleware
from memstream.llm import ModelRequest
from memstream.memory.bounds import Bounds
from memstream.memory.embeddings import Embedder
from memstream.memory.inprocess import InProcessStores
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Progress

__all__ = ["EchoRun", "run_echo", "simulate"]

TARGET = "restatements ≤ 5% of stored, no fact evicted by its own echoes"
_RESTATED = "You told me: "
# What a tenant tells: its own facts (the heuristic scores them higher) and its team's.
_SUBJECTS = (
    "my locker number", "my sister's city", "my favourite tea", "my dentist", "my car",
    "my gym day", "my allergy", "my manager", "my badge colour", "my home station",
    "the team's standup room", "the team's deploy day", "the team's database",
    "the team's pager tool", "the team's wiki space", "the team's budget code",
)  # fmt: skip
_VALUES = (
    "amber", "basalt", "cobalt", "dahlia", "ember", "fjord", "garnet", "harbor", "indigo",
    "juniper", "kestrel", "lagoon", "meadow", "nectar", "onyx", "pepper", "quartz", "russet",
    "saffron", "tundra", "umber", "velvet", "willow", "yarrow", "zephyr",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class EchoRun:
    """The end state of one simulation."""

    stored: int
    restatements: int
    facts: int
    facts_lost: int
    facts_lost_to_echoes: int
    recall_at_5: float

    @property
    def restated_share(self) -> float:
        return self.restatements / self.stored if self.stored else 0.0


def _noted(request: ModelRequest) -> str:
    return "Noted."


def _answer(share: float, rng: random.Random) -> Callable[[ModelRequest], str]:
    def reply(request: ModelRequest) -> str:
        shown = [
            line.split("] ", 1)[1]
            for section in request.sections
            for line in section.content.splitlines()
            if line.startswith("- [") and "] " in line
        ]
        if shown and rng.random() < share:
            return _RESTATED + shown[0].removeprefix(_RESTATED)
        return "I am not sure, sorry."

    return reply


def simulate(
    embedder: Embedder,
    *,
    echo_control: bool,
    tenants: int,
    turns: int,
    facts: int,
    share: float,
    bound: int,
    seed: int = 7,
) -> EchoRun:
    """Run the script for every tenant with echo control on or off; the end state."""
    stores = InProcessStores(embedder, bounds=Bounds(max_memories=bound))
    rng = random.Random(seed)
    stored = restatements = lost = lost_to_echoes = hits = 0
    for t in range(tenants):
        tenant = f"tenant-{t}"
        told = [
            (f"{subject} is {_VALUES[(t + i) % len(_VALUES)]}", subject)
            for i, subject in enumerate(_SUBJECTS[:facts])
        ]
        # Every other fact is asked to be remembered (the heuristic scores it above the
        # questions); the rest are said plainly, as important as a question and its answer.
        said = [
            f"Please remember that {fact}." if i % 2 == 0 else f"{fact[0].upper()}{fact[1:]}."
            for i, (fact, _) in enumerate(told)
        ]
        questions = [f"What is {subject}?" for _, subject in told]
        replies = [_noted] * len(said) + [_answer(share, rng)] * turns
        memory = SemanticMemoryMiddleware(
            stores=stores,
            client=ScriptedModel([]),
            recall=RecallConfig(),
            record=RecordConfig(echo_control=echo_control),
        )
        agent = Agent(ScriptedModel(replies), middleware=[memory])
        for n, sentence in enumerate(said):
            agent.run(sentence, RunConfig(f"tell-{n}", tenant))
        for n in range(turns):
            agent.run(rng.choice(questions), RunConfig(f"ask-{n}", tenant))
        held = stores.memories(tenant)
        contents = [m.content for m in held]
        stored += len(held)
        restatements += sum(c.startswith(_RESTATED) for c in contents)
        for sentence, question in zip(said, questions, strict=True):
            kept = [m for m in held if m.content == sentence and m.role == "user"]
            if not kept:
                lost += 1
                lost_to_echoes += any(c == _RESTATED + sentence for c in contents)
                continue
            top = stores.recall(tenant, question, k=5)
            hits += any(hit.memory.id == kept[0].id for hit in top)
    total = tenants * facts
    return EchoRun(stored, restatements, total, lost, lost_to_echoes, hits / total)


def run_echo(
    settings: Settings,
    embedder: Embedder,
    *,
    tenants: int = 3,
    turns: int = 300,
    facts: int = 12,
    share: float = 0.6,
    bound: int = 36,
) -> BenchResult:
    started = time.monotonic()
    progress = Progress("echo")
    runs: dict[str, EchoRun] = {}
    for side, control in (("on", True), ("off", False)):
        progress.say(f"echo control {side}: {tenants} tenants x {turns} turns")
        runs[side] = simulate(
            embedder, echo_control=control, tenants=tenants, turns=turns, facts=facts,
            share=share, bound=bound,
        )  # fmt: skip
    on, off = runs["on"], runs["off"]
    figures: dict[str, object] = {
        "tenants": tenants, "turns": turns, "facts_per_tenant": facts, "restating_share": share,
        "bound": bound,
    }  # fmt: skip
    for side, run in runs.items():
        figures |= {
            f"stored_{side}": run.stored,
            f"restated_share_{side}": round(run.restated_share, 4),
            f"facts_lost_{side}": run.facts_lost,
            f"facts_lost_to_echoes_{side}": run.facts_lost_to_echoes,
            f"recall_at_5_{side}": round(run.recall_at_5, 4),
        }
    baseline = "echo control off, same script"
    return BenchResult(
        name="echo",
        figures=figures,
        comparisons=[
            Comparison(
                "restatements among stored memories",
                round(on.restated_share * 100, 2),
                round(off.restated_share * 100, 2),
                "%",
                baseline,
                False,
                TARGET,
            ),
            Comparison(
                "facts evicted by their own echoes",
                on.facts_lost_to_echoes,
                off.facts_lost_to_echoes,
                "facts",
                baseline,
                False,
                TARGET,
            ),
            Comparison(
                "recall@5 of the facts",
                round(on.recall_at_5, 4),
                round(off.recall_at_5, 4),
                "share",
                baseline,
                True,
            ),
        ],
        notes=[
            f"in-process store, bound {bound} memories per tenant, {facts} facts each; the "
            f"model restates the first memory it was shown in {share:.0%} of its answers"
        ],
        seconds=time.monotonic() - started,
    )
