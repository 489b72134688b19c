"""The middleware contract, hook by hook, as the seed words it."""

from __future__ import annotations

import dataclasses
from typing import Any

from memstream.agent import (
    Agent,
    AgentMiddleware,
    Block,
    Fail,
    InMemoryJournal,
    Message,
    ModelRequest,
    ModelResponse,
    Proceed,
    PromptSection,
    RunContext,
    ScriptedModel,
    Tool,
    ToolSpec,
    Turn,
)
from memstream.agent.middleware import ModelCall

from .conftest import CONFIG, calls

# -- before_agent -----------------------------------------------------------------------


class Rewriter(AgentMiddleware):
    id = "rewriter"
    writes = frozenset({"seen"})

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def before_agent(self, input: str, context: RunContext) -> Proceed | Block:
        self.log.append(f"before_agent saw {input!r}")
        return Proceed(input=input.upper(), update={"seen": input})


class StateSection(AgentMiddleware):
    id = "section"

    def prompt_section(self, context: RunContext) -> PromptSection | None:
        seen = context.state.get("seen")
        return PromptSection("seen", f"input was {seen}") if seen else None


def test_before_agent_sees_the_input_first_and_its_update_reaches_the_first_model_call() -> None:
    log: list[str] = []

    def model_reply(request: ModelRequest) -> str:
        log.append("model called")
        return "ok"

    model = ScriptedModel([model_reply])
    agent = Agent(model, middleware=[Rewriter(log), StateSection()])

    result = agent.run("hello", CONFIG)

    assert result.status == "completed"
    assert log == ["before_agent saw 'hello'", "model called"]
    (request,) = model.requests
    assert request.messages[-1] == Message("user", "HELLO")
    assert request.sections == (PromptSection("seen", "input was hello"),)


class Refuser(AgentMiddleware):
    id = "refuser"

    def before_agent(self, input: str, context: RunContext) -> Proceed | Block:
        return Block("not today")


def test_a_block_in_before_agent_stops_the_run_before_any_model_call() -> None:
    model = ScriptedModel(["never"])
    result = Agent(model, middleware=[Refuser()]).run("hi", CONFIG)
    assert (result.status, result.reason) == ("blocked", "refuser: not today")
    assert model.requests == []


# -- writes -----------------------------------------------------------------------------


class Sneaky(AgentMiddleware):
    id = "sneaky"
    writes = frozenset({"mine"})

    def __init__(self, hook: str) -> None:
        self.hook = hook

    def before_agent(self, input: str, context: RunContext) -> Proceed | Block:
        return Proceed(update={"theirs": 1} if self.hook == "before_agent" else {"mine": 1})

    def wrap_model_call(
        self, request: ModelRequest, next: ModelCall, context: RunContext
    ) -> ModelResponse | Fail:
        response = next(request)
        return response.add_update({"theirs": 2} if self.hook == "wrap_model_call" else {"mine": 2})

    def after_agent(self, turn: Turn, context: RunContext) -> Proceed | Block:
        return Proceed(update={"theirs": 3} if self.hook == "after_agent" else {"mine": 3})


def test_writes_to_declared_keys_are_committed() -> None:
    agent = Agent(ScriptedModel(["ok"]), middleware=[Sneaky("none")])
    assert agent.run("hi", CONFIG).status == "completed"
    assert agent.thread("t1").state == {"mine": 3}


def test_a_write_to_an_undeclared_key_fails_the_run_naming_middleware_and_key() -> None:
    for hook in ("before_agent", "wrap_model_call", "after_agent"):
        agent = Agent(ScriptedModel(["ok"]), middleware=[Sneaky(hook)])
        result = agent.run("hi", CONFIG)
        assert result.status == "failed", hook
        assert "middleware 'sneaky' wrote state key 'theirs'" in result.reason
        assert "theirs" not in agent.thread("t1").state


# -- prompt sections --------------------------------------------------------------------


class Counter(AgentMiddleware):
    id = "counter"
    writes = frozenset({"steps"})

    def wrap_model_call(
        self, request: ModelRequest, next: ModelCall, context: RunContext
    ) -> ModelResponse | Fail:
        return next(request).add_update({"steps": context.state.get("steps", 0) + 1})

    def prompt_section(self, context: RunContext) -> PromptSection:
        return PromptSection("counter", f"steps so far: {context.state.get('steps', 0)}")


class Fixed(AgentMiddleware):
    def __init__(self, name: str, text: str) -> None:
        self.id = name
        self.text = text

    def prompt_section(self, context: RunContext) -> PromptSection:
        return PromptSection(self.id, self.text)


def echo_tool() -> Tool:
    return Tool(ToolSpec("echo", "echo", {"type": "object", "properties": {}}), lambda: "echoed")


def test_sections_are_collected_before_every_step_from_committed_state_in_stack_order() -> None:
    model = ScriptedModel([calls(("echo", {})), "done"])
    agent = Agent(model, middleware=[Counter(), Fixed("z-last", "fixed")], tools=[echo_tool()])

    assert agent.run("go", CONFIG).status == "completed"

    first, second = model.requests
    assert [s.title for s in first.sections] == ["counter", "z-last"]
    assert first.sections[0].content == "steps so far: 0"
    assert second.sections[0].content == "steps so far: 1"
    assert "## counter\nsteps so far: 1" in second.system_prompt()
    thread = agent.thread("t1")
    assert thread.state == {"steps": 2}  # sections themselves are never stored
    assert all("steps so far" not in m.content for m in thread.messages)


def test_the_agent_bounds_all_sections_together() -> None:
    model = ScriptedModel(["ok"])
    sections = [Fixed("a", "x" * 30), Fixed("b", "y" * 30), Fixed("c", "z" * 30)]
    Agent(model, middleware=sections, max_prompt_section_tokens=10).run("hi", CONFIG)
    (request,) = model.requests
    assert sum(len(s.content) for s in request.sections) == 40
    assert [s.content for s in request.sections] == ["x" * 30, "y" * 10]


class Broken(AgentMiddleware):
    id = "broken"

    def prompt_section(self, context: RunContext) -> Fail:
        return Fail("cannot render")


def test_a_failing_section_fails_the_run() -> None:
    model = ScriptedModel(["never"])
    result = Agent(model, middleware=[Broken()]).run("hi", CONFIG)
    assert (result.status, result.reason) == ("failed", "broken: cannot render")
    assert model.requests == []


# -- wrap_model_call --------------------------------------------------------------------


class Wrapper(AgentMiddleware):
    id = "wrapper"

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    def wrap_model_call(
        self, request: ModelRequest, next: ModelCall, context: RunContext
    ) -> ModelResponse | Fail:
        if self.behaviour == "note":
            note = Message("system", "be brief")
            return next(dataclasses.replace(request, messages=(note, *request.messages)))
        if self.behaviour == "filter":
            return next(dataclasses.replace(request, tools=()))
        if self.behaviour == "retry-discard":
            next(request)  # discarded, but paid for
            return next(request)
        if self.behaviour == "transform":
            response = next(request)
            return dataclasses.replace(response, message=Message("assistant", "[redacted]"))
        return Fail("model refused")


def test_a_wrapper_may_inject_a_note() -> None:
    model = ScriptedModel(["ok"])
    Agent(model, middleware=[Wrapper("note")]).run("hi", CONFIG)
    assert model.requests[0].messages[0] == Message("system", "be brief")


def test_calls_through_next_are_counted_even_when_the_wrapper_discards_them() -> None:
    model = ScriptedModel(["first", "second"])
    agent = Agent(model, middleware=[Wrapper("retry-discard")])
    result = agent.run("hi", CONFIG)
    assert result.answer == "second"
    assert result.usage.calls == 2
    assert agent.thread("t1").usage.calls == 2


def test_a_wrapper_may_transform_the_response_and_fail_the_run() -> None:
    assert Agent(ScriptedModel(["secret"]), middleware=[Wrapper("transform")]).run(
        "hi", CONFIG
    ).answer == ("[redacted]")
    failed = Agent(ScriptedModel([]), middleware=[Wrapper("fail")]).run("hi", CONFIG)
    assert (failed.status, failed.reason) == ("failed", "wrapper: model refused")


class Denier(AgentMiddleware):
    id = "denier"

    def wrap_tool_call(self, call: Any, next: Any, context: RunContext) -> Any:
        from memstream.agent import ToolError

        return ToolError(f"Denied: {call.name} is not allowed")


def test_filtering_tools_is_not_permission_control_wrap_tool_call_still_decides() -> None:
    ran: list[str] = []
    tool = Tool(ToolSpec("rm", "remove", {"type": "object"}), lambda: ran.append("rm") or "gone")
    model = ScriptedModel([calls(("rm", {})), "I tried"])
    agent = Agent(model, middleware=[Wrapper("filter"), Denier()], tools=[tool])

    assert agent.run("clean up", CONFIG).status == "completed"

    assert model.requests[0].tools == ()  # the model was not offered the tool
    assert ran == []  # and calling it anyway was denied in wrap_tool_call
    tool_message = agent.thread("t1").messages[-2]
    assert tool_message == Message("tool", "Denied: rm is not allowed", tool_call_id="c0")


# -- after_agent ------------------------------------------------------------------------


class Recorder(AgentMiddleware):
    def __init__(self, name: str, log: list[str], block: bool = False) -> None:
        self.id = name
        self.log = log
        self.block = block

    def after_agent(self, turn: Turn, context: RunContext) -> Proceed | Block:
        self.log.append(self.id)
        return Block("withheld") if self.block else Proceed()


def test_after_agent_runs_in_reverse_stack_order() -> None:
    log: list[str] = []
    agent = Agent(ScriptedModel(["ok"]), middleware=[Recorder(n, log) for n in "abc"])
    agent.run("hi", CONFIG)
    assert log == ["c", "b", "a"]


def test_a_block_in_after_agent_stops_the_others_and_restores_the_thread() -> None:
    log: list[str] = []
    stack = [Recorder("memory", log), Recorder("guardrails", log, block=True), Recorder("x", log)]
    agent = Agent(ScriptedModel(["first answer", "blocked answer"]), middleware=stack[:1])
    agent.run("first", CONFIG)
    before = agent.thread("t1").snapshot()

    blocking = Agent(ScriptedModel(["blocked answer"]), middleware=stack, threads=agent._threads)
    log.clear()
    result = blocking.run("second", CONFIG)

    assert (result.status, result.reason) == ("blocked", "guardrails: withheld")
    assert log == ["x", "guardrails"]  # memory, registered outside, never ran
    after = blocking.thread("t1").snapshot()
    assert after.messages == before.messages and after.turns == before.turns
    assert after.usage.calls == before.usage.calls + 1  # the call was made


class Applier(AgentMiddleware):
    """Inside the guardrail: its after_agent runs first and applies an effect."""

    id = "applier"

    def __init__(self, target: list[str]) -> None:
        self.target = target

    def after_agent(self, turn: Turn, context: RunContext) -> Proceed | Block:
        context.effect("audit.write", context.run_id, lambda: self.target.append(turn.answer) or 1)
        return Proceed()


def test_a_block_restores_the_thread_but_an_applied_effect_stays_applied() -> None:
    audit: list[str] = []
    journal = InMemoryJournal()
    agent = Agent(
        ScriptedModel(["forbidden words"]),
        middleware=[Recorder("guardrails", [], block=True), Applier(audit)],
        journal=journal,
    )
    result = agent.run("hi", CONFIG, run_id="r1")
    assert result.status == "blocked"
    assert agent.thread("t1").messages == []  # the thread is as before the turn
    assert audit == ["forbidden words"]  # the store is not rolled back
    record = journal.effect("r1", "audit.write", "r1")
    assert record is not None and record.status == "applied"
