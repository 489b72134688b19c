"""The effects journal and recover: a crashed run is replayed without doing anything twice."""

from __future__ import annotations

import pytest

from memstream.agent import (
    Agent,
    AgentMiddleware,
    InMemoryJournal,
    Journal,
    Message,
    ModelRequest,
    ModelResponse,
    Proceed,
    RunContext,
    ScriptedModel,
    Turn,
    Usage,
)
from memstream.agent.journal import run_effect
from memstream.errors import EffectRefusedError

from .conftest import CONFIG


class Crash(Exception):
    """Stands for the process dying: nothing in the runtime handles it."""


class Writer(AgentMiddleware):
    """Writes each answer to `target` as a journaled effect; may crash around it."""

    id = "writer"

    def __init__(self, target: list[str], *, crash: str = "", replay_safe: bool = False) -> None:
        self.target = target
        self.crash = crash
        self.replay_safe = replay_safe

    def after_agent(self, turn: Turn, context: RunContext) -> Proceed:
        def write() -> int:
            self.target.append(turn.answer)
            if self.crash == "inside":
                raise Crash("died after writing, before the journal knew")
            return len(self.target)

        context.effect("target.write", f"{context.run_id}", write, replay_safe=self.replay_safe)
        if self.crash == "after":
            raise Crash("died after the effect was journaled")
        return Proceed()


def crashed_run(
    journal: Journal, target: list[str], crash: str, **kw: bool
) -> tuple[Agent, ScriptedModel, str]:
    model = ScriptedModel(["the answer"])
    writer = Writer(target, crash=crash, **kw)
    agent = Agent(model, middleware=[writer], journal=journal)
    with pytest.raises(Crash):
        agent.run("question", CONFIG, run_id="run-1")
    writer.crash = ""  # the restarted process does not crash again
    return agent, model, "run-1"


def test_recover_returns_recorded_outcomes_without_running_effects_again() -> None:
    target: list[str] = []
    agent, model, run_id = crashed_run(InMemoryJournal(), target, "after")
    assert target == ["the answer"]

    result = agent.recover(run_id)

    assert (result.status, result.answer) == ("completed", "the answer")
    assert target == ["the answer"]  # the effect did not run again
    assert len(model.requests) == 1  # nor did the model call: its reply was journaled
    thread = agent.thread("t1")
    assert [m.role for m in thread.messages] == ["user", "assistant"]  # not doubled
    assert thread.turns == 1


def test_an_effect_that_may_have_run_is_refused_on_a_target_that_cannot_tell() -> None:
    target: list[str] = []
    agent, _, run_id = crashed_run(InMemoryJournal(), target, "inside")
    with pytest.raises(
        EffectRefusedError, match=r"target\.write \(run-1\) of run run-1 was started"
    ):
        agent.recover(run_id)
    assert target == ["the answer"]


def test_an_effect_that_may_have_run_is_run_again_where_the_target_can_tell() -> None:
    target: list[str] = []
    agent, _, run_id = crashed_run(InMemoryJournal(), target, "inside", replay_safe=True)
    assert agent.recover(run_id).status == "completed"
    assert target == ["the answer", "the answer"]  # an idempotent target would absorb this


def test_only_running_runs_can_be_recovered() -> None:
    agent = Agent(ScriptedModel(["ok"]))
    agent.run("hi", CONFIG, run_id="done")
    with pytest.raises(ValueError, match="ended \\(completed\\)"):
        agent.recover("done")
    with pytest.raises(ValueError, match="no run 'nope'"):
        agent.recover("nope")


def test_run_effect_records_started_then_applied() -> None:
    journal = InMemoryJournal()
    assert run_effect(journal, "r", "e", "k", lambda: {"n": 1}) == {"n": 1}
    record = journal.effect("r", "e", "k")
    assert record is not None and (record.status, record.outcome) == ("applied", {"n": 1})
    assert run_effect(journal, "r", "e", "k", lambda: {"n": 2}) == {"n": 1}


class Summarizer(AgentMiddleware):
    """Makes a model call of its own through the accounted client."""

    id = "summarizer"

    def __init__(self, client: ScriptedModel) -> None:
        self.client = client

    def after_agent(self, turn: Turn, context: RunContext) -> Proceed:
        request = ModelRequest("summarize", (Message("user", turn.answer),))
        context.accounted(self.client).complete(request)
        return Proceed()


def test_a_middlewares_own_model_calls_count_in_the_threads_usage() -> None:
    side_model = ScriptedModel(
        [ModelResponse(Message("assistant", "short"), Usage(input_tokens=7, output_tokens=3))]
    )
    main_model = ScriptedModel(
        [
            ModelResponse(
                Message("assistant", "long answer"), Usage(input_tokens=10, output_tokens=5)
            )
        ]
    )
    agent = Agent(main_model, middleware=[Summarizer(side_model)])
    result = agent.run("hi", CONFIG)
    assert result.usage == Usage(calls=2, input_tokens=17, output_tokens=8)
    assert agent.thread("t1").usage == result.usage
