"""wrap_tool_call, argument validation, and runs that suspend for an answer or an approval."""

from __future__ import annotations

from typing import Any

from memstream.agent import (
    Agent,
    AgentMiddleware,
    Ask,
    AskingMiddleware,
    Fail,
    Fatal,
    Message,
    ModelRequest,
    ModelResponse,
    NeedsApproval,
    RunContext,
    ScriptedModel,
    Success,
    Tool,
    ToolCall,
    ToolError,
    ToolOutcome,
    ToolSpec,
)
from memstream.agent.middleware import ModelCall, ToolNext

from .conftest import CONFIG, calls

WEATHER = ToolSpec(
    "weather",
    "the weather in a city",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)


def weather_tool(log: list[str]) -> Tool:
    def weather(city: str, days: int = 1) -> str:
        log.append(city)
        return f"sunny in {city} for {days} day(s)"

    return Tool(WEATHER, weather)


class ToolWrapper(AgentMiddleware):
    id = "tools"
    writes = frozenset({"last_tool"})

    def __init__(self, behaviour: str, log: list[str]) -> None:
        self.behaviour = behaviour
        self.log = log

    def wrap_tool_call(self, call: ToolCall, next: ToolNext, context: RunContext) -> ToolOutcome:
        self.log.append(f"wrapper saw {dict(call.arguments)}")
        if self.behaviour == "deny":
            return ToolError("Denied: no weather today")
        if self.behaviour == "short-circuit":
            return Success("cached: rainy")
        if self.behaviour == "retry":
            next(call)
            outcome = next(call)
            return Success(f"{outcome.content} (checked twice)", update={"last_tool": call.name})  # type: ignore[union-attr]
        if self.behaviour == "fatal":
            return Fatal("tool budget exhausted")
        if self.behaviour == "approval" and not context.approved:
            return NeedsApproval(f"look up the weather in {call.arguments['city']}?")
        return next(call)


def tool_message(agent: Agent) -> Message:
    return next(m for m in agent.thread("t1").messages if m.role == "tool")


def test_arguments_are_validated_before_any_wrapper_sees_the_call() -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("weather", {"city": 3, "color": "red"})), "sorry"])
    agent = Agent(model, middleware=[ToolWrapper("pass", log)], tools=[weather_tool(log)])
    agent.run("weather?", CONFIG)
    assert log == []
    content = tool_message(agent).content
    assert content.startswith("Invalid arguments: ")
    assert "arguments.city must be of type string, got int" in content
    assert "arguments.color is not a known argument" in content


def test_a_wrapper_denies_with_an_error_outcome_the_model_sees() -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("weather", {"city": "Oslo"})), "ok"])
    agent = Agent(model, middleware=[ToolWrapper("deny", log)], tools=[weather_tool(log)])
    assert agent.run("weather?", CONFIG).status == "completed"
    assert log == ["wrapper saw {'city': 'Oslo'}"]  # the tool never ran
    assert tool_message(agent).content == "Denied: no weather today"
    assert model.requests[1].messages[-1].content == "Denied: no weather today"


def test_a_wrapper_may_short_circuit_retry_and_transform_and_add_an_update() -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("weather", {"city": "Oslo"})), "ok"])
    agent = Agent(model, middleware=[ToolWrapper("short-circuit", log)], tools=[weather_tool(log)])
    agent.run("weather?", CONFIG)
    assert tool_message(agent).content == "cached: rainy"
    assert "Oslo" not in log

    log.clear()
    model = ScriptedModel([calls(("weather", {"city": "Oslo", "days": 2})), "ok"])
    agent = Agent(model, middleware=[ToolWrapper("retry", log)], tools=[weather_tool(log)])
    agent.run("weather?", CONFIG)
    assert log.count("Oslo") == 2
    assert tool_message(agent).content == "sunny in Oslo for 2 day(s) (checked twice)"
    assert agent.thread("t1").state == {"last_tool": "weather"}


def test_fatal_fails_the_run() -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("weather", {"city": "Oslo"}))])
    result = Agent(model, middleware=[ToolWrapper("fatal", log)], tools=[weather_tool(log)]).run(
        "weather?", CONFIG
    )
    assert (result.status, result.reason) == ("failed", "tool weather: tool budget exhausted")


def test_a_failing_tool_is_reported_to_the_model() -> None:
    def broken(city: str) -> str:
        raise RuntimeError("service down")

    model = ScriptedModel([calls(("weather", {"city": "Oslo"})), "ok"])
    agent = Agent(model, tools=[Tool(WEATHER, broken)])
    agent.run("weather?", CONFIG)
    assert tool_message(agent).content == "weather failed: service down"


def test_an_approval_suspends_the_run_and_resume_runs_the_tool() -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("weather", {"city": "Oslo"})), "It is sunny."])
    agent = Agent(model, middleware=[ToolWrapper("approval", log)], tools=[weather_tool(log)])

    suspended = agent.run("weather?", CONFIG)
    assert (suspended.status, suspended.waiting_for) == ("suspended", "approval")
    assert suspended.reason == "look up the weather in Oslo?"
    assert "Oslo" not in log

    done = agent.resume(suspended.run_id, approved=True)
    assert (done.status, done.answer) == ("completed", "It is sunny.")
    assert log.count("Oslo") == 1
    assert tool_message(agent).content == "sunny in Oslo for 1 day(s)"


def test_a_denied_approval_tells_the_model() -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("weather", {"city": "Oslo"})), "Fine, I won't."])
    agent = Agent(model, middleware=[ToolWrapper("approval", log)], tools=[weather_tool(log)])
    suspended = agent.run("weather?", CONFIG)
    done = agent.resume(suspended.run_id, approved=False)
    assert done.answer == "Fine, I won't."
    assert tool_message(agent).content == "Denied: look up the weather in Oslo? (not approved)"
    assert "Oslo" not in log


class Clarifier(AskingMiddleware):
    id = "clarifier"

    def wrap_model_call(
        self, request: ModelRequest, next: ModelCall, context: RunContext
    ) -> ModelResponse | Fail | Ask:
        if context.answer is None:
            return Ask("Which city?")
        note = Message("system", f"The user means {context.answer}.")
        return next(ModelRequest(request.system, (*request.messages, note), request.tools))


class Impostor(AgentMiddleware):
    id = "impostor"

    def wrap_model_call(self, request: Any, next: Any, context: Any) -> Any:
        return Ask("may I?")


def test_an_asking_wrapper_suspends_the_run_and_resumes_with_the_answer() -> None:
    model = ScriptedModel(["Oslo it is."])
    agent = Agent(model, middleware=[Clarifier()])

    suspended = agent.run("weather?", CONFIG)
    assert (suspended.status, suspended.waiting_for, suspended.reason) == (
        "suspended",
        "answer",
        "Which city?",
    )
    assert model.requests == []

    done = agent.resume(suspended.run_id, answer="Oslo")
    assert done.answer == "Oslo it is."
    assert model.requests[0].messages[-1].content == "The user means Oslo."


def test_only_an_asking_wrapper_may_suspend() -> None:
    result = Agent(ScriptedModel([]), middleware=[Impostor()]).run("hi", CONFIG)
    assert result.status == "failed"
    assert "impostor asked a question, but only an AskingMiddleware may" in result.reason
