"""The agent runtime: runs a turn through the middleware stack, and suspends, resumes and
recovers runs.

A turn, as the stack sees it:

    before_agent     in stack order; may rewrite the input, add an update, or block
    model steps      before each: prompt sections from the committed state, in stack order,
                     bounded together; the model call goes through wrap_model_call (first
                     registered = outermost); tool calls, after argument validation, through
                     wrap_tool_call
    after_agent      in reverse stack order; a block stops the rest and restores the thread

The turn is a generator (`_flow`) that yields only where the run must wait for a person: an
asking wrapper's question, or a tool call that needs approval. `run` and `resume` drive it.
Control leaves the middleware chain by two private BaseException subclasses, so a wrapper's
`except Exception` cannot swallow a suspension or a failure.

Every model call and tool call is a journaled effect, as is any effect a middleware runs
through `context.effect`: `recover` replays a crashed run from the thread as it was before the
run, and each effect the journal saw applied returns its recorded outcome instead of running
again.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memstream.agent.context import Clock, RunConfig, RunContext, SystemClock
from memstream.agent.journal import InMemoryJournal, Journal, RunRecord
from memstream.agent.middleware import (
    AgentMiddleware,
    Ask,
    AskingMiddleware,
    Block,
    Fail,
    Fatal,
    ModelCall,
    NeedsApproval,
    Success,
    ToolError,
    ToolNext,
    ToolOutcome,
    Turn,
    check_middleware,
)
from memstream.agent.threads import InMemoryThreadStore, ThreadSnapshot, ThreadState, ThreadStore
from memstream.agent.tools import Tool, schema_errors
from memstream.errors import ConfigurationError, InvalidInputError
from memstream.llm import (
    Message,
    ModelClient,
    ModelRequest,
    ModelResponse,
    PromptSection,
    ToolCall,
    Usage,
    response_from_json,
    response_to_json,
)

__all__ = ["Agent", "RunResult", "order_stack"]

RunOutcome = Literal["completed", "blocked", "failed", "suspended"]


@dataclass(frozen=True, slots=True)
class RunResult:
    run_id: str
    status: RunOutcome
    answer: str = ""
    reason: str = ""
    waiting_for: Literal["", "answer", "approval"] = ""
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class _Suspension:
    waiting_for: Literal["answer", "approval"]
    reason: str


@dataclass(frozen=True, slots=True)
class _Resume:
    answer: str | None = None
    approved: bool | None = None


class _Suspend(BaseException):
    def __init__(self, question: str) -> None:
        self.question = question


class _RunFailure(BaseException):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def order_stack(middleware: Sequence[AgentMiddleware]) -> tuple[AgentMiddleware, ...]:
    """Registration order, adjusted so each middleware comes before those it `runs_before`.

    Middleware are placed in registration order; one that must run inside others pulls those
    forward to just before itself (in their own registration order), so the order changes no
    more than the constraints demand. Unknown ids and cycles are refused.
    """
    for item in middleware:
        check_middleware(item)
    by_id: dict[str, AgentMiddleware] = {}
    for item in middleware:
        if item.id in by_id:
            raise ConfigurationError(f"two middleware have the id {item.id!r}; ids must be unique")
        by_id[item.id] = item
    must_follow: dict[str, set[str]] = {item.id: set() for item in middleware}
    for item in middleware:
        for later in item.runs_before:
            if later not in by_id:
                raise ConfigurationError(
                    f"{item.id}.runs_before names {later!r}, which is not registered; "
                    f"registered: {sorted(by_id)}"
                )
            must_follow[later].add(item.id)
    position = {item.id: index for index, item in enumerate(middleware)}
    ordered: list[AgentMiddleware] = []
    placed: set[str] = set()

    def place(item: AgentMiddleware, path: tuple[str, ...]) -> None:
        if item.id in placed:
            return
        if item.id in path:
            cycle = [*path[path.index(item.id) :], item.id]
            raise ConfigurationError(f"runs_before constraints form a cycle: {' -> '.join(cycle)}")
        for outer in sorted(must_follow[item.id], key=position.__getitem__):
            place(by_id[outer], (*path, item.id))
        ordered.append(item)
        placed.add(item.id)

    for item in middleware:
        place(item, ())
    return tuple(ordered)


class Agent:
    """An agent: a model, tools and a middleware stack, running turns on threads."""

    def __init__(
        self,
        model: ModelClient,
        *,
        middleware: Iterable[AgentMiddleware] = (),
        tools: Iterable[Tool] = (),
        system: str = "You are a helpful assistant.",
        max_steps: int = 8,
        max_prompt_section_tokens: int = 2000,
        journal: Journal | None = None,
        threads: ThreadStore | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.stack = order_stack(list(middleware))
        self.tools = {tool.name: tool for tool in tools}
        self.state_keys = frozenset().union(*(m.writes for m in self.stack))
        self._model = model
        self._system = system
        self._max_steps = max_steps
        self._max_section_chars = max_prompt_section_tokens * 4
        self._journal = journal or InMemoryJournal()
        self._threads = threads or InMemoryThreadStore()
        self._clock = clock or SystemClock()
        self._by_id = {m.id: m for m in self.stack}
        self._hooks = {
            hook: tuple(m for m in self.stack if m.overrides(hook))
            for hook in ("before_agent", "prompt_section", "wrap_model_call", "wrap_tool_call")
        }
        self._after = tuple(m for m in reversed(self.stack) if m.overrides("after_agent"))
        self._suspended: dict[
            str, tuple[Generator[_Suspension, _Resume, RunResult], ThreadState]
        ] = {}

    # -- public API -------------------------------------------------------------------

    def run(self, input: str, config: RunConfig, *, run_id: str | None = None) -> RunResult:
        thread = self._threads.get(config.thread_id)
        if any(t.thread_id == config.thread_id for _, t in self._suspended.values()):
            raise InvalidInputError(
                f"thread {config.thread_id!r} has a suspended run; resume it first"
            )
        run_id = run_id or uuid.uuid4().hex
        before = thread.snapshot()
        self._journal.begin_run(
            RunRecord(run_id, config.thread_id, config.tenant_id, input, before)
        )
        return self._start(run_id, input, config, thread, before)

    def resume(
        self, run_id: str, *, answer: str | None = None, approved: bool | None = None
    ) -> RunResult:
        """Continue a suspended run with the answer to its question, or the approval decision."""
        if run_id not in self._suspended:
            raise InvalidInputError(f"run {run_id!r} is not suspended")
        flow, thread = self._suspended.pop(run_id)
        return self._drive(run_id, flow, thread, _Resume(answer, approved))

    def recover(self, run_id: str) -> RunResult:
        """Replay a run that crashed, from the thread as it was before it: every effect the
        journal saw applied returns its recorded outcome instead of running again."""
        record = self._journal.run(run_id)
        if record is None:
            raise InvalidInputError(f"the journal has no run {run_id!r} to recover")
        if record.status != "running":
            raise InvalidInputError(f"run {run_id!r} ended ({record.status}); nothing to recover")
        thread = ThreadState.from_snapshot(record.snapshot)
        self._threads.put(thread)
        config = RunConfig(thread_id=record.thread_id, tenant_id=record.tenant_id)
        return self._start(run_id, record.input, config, thread, record.snapshot)

    def thread(self, thread_id: str) -> ThreadState:
        return self._threads.get(thread_id)

    # -- driving the flow ---------------------------------------------------------------

    def _start(
        self,
        run_id: str,
        input: str,
        config: RunConfig,
        thread: ThreadState,
        before: ThreadSnapshot,
    ) -> RunResult:
        def count(usage: Usage) -> None:
            thread.usage = thread.usage + usage

        context = RunContext(
            run_id=run_id,
            config=config,
            clock=self._clock,
            journal=self._journal,
            state=thread.state,
            count_usage=count,
            turn_index=thread.turns,
        )
        flow = self._flow(input, thread, context, before)
        return self._drive(run_id, flow, thread, None)

    def _drive(
        self,
        run_id: str,
        flow: Generator[_Suspension, _Resume, RunResult],
        thread: ThreadState,
        resume: _Resume | None,
    ) -> RunResult:
        try:
            suspension = flow.send(resume) if resume is not None else next(flow)
        except StopIteration as done:
            result: RunResult = done.value
            self._journal.end_run(run_id, result.status)
            return result
        self._suspended[run_id] = (flow, thread)
        self._journal.end_run(run_id, "suspended")
        return RunResult(
            run_id,
            "suspended",
            reason=suspension.reason,
            waiting_for=suspension.waiting_for,
            usage=thread.usage,
        )

    def _flow(
        self, input: str, thread: ThreadState, context: RunContext, before: ThreadSnapshot
    ) -> Generator[_Suspension, _Resume, RunResult]:
        def ended(status: RunOutcome, reason: str = "", answer: str = "") -> RunResult:
            if status != "completed":
                # A block or failure restores the thread's messages and state; usage stays,
                # since those model calls were made and paid for. Effects stay applied.
                thread.restore(before, keep_usage=True)
            return RunResult(context.run_id, status, answer, reason, usage=thread.usage)

        try:
            for middleware in self._hooks["before_agent"]:
                result = middleware.before_agent(input, context)
                if isinstance(result, Block):
                    return ended("blocked", f"{middleware.id}: {result.reason}")
                self._commit(thread, middleware.id, result.update)
                if result.input is not None:
                    input = result.input
            thread.messages.append(Message("user", input))
            for step in range(self._max_steps):
                response = yield from self._model_step(step, thread, context)
                for update in response.updates:
                    self._commit(thread, update.owner, update.values)
                thread.messages.append(response.message)
                if not response.message.tool_calls:
                    break
                for call in response.message.tool_calls:
                    outcome = yield from self._tool_step(call, thread, context)
                    content = outcome.content if isinstance(outcome, Success) else outcome.message
                    thread.messages.append(Message("tool", content, tool_call_id=call.id))
            else:
                return ended("failed", f"no answer after {self._max_steps} model steps")
            answer = response.message.content
            turn = Turn(input, answer)
            for middleware in self._after:
                after = middleware.after_agent(turn, context)
                if isinstance(after, Block):
                    return ended("blocked", f"{middleware.id}: {after.reason}")
                self._commit(thread, middleware.id, after.update)
        except _RunFailure as failure:
            return ended("failed", failure.reason)
        thread.turns += 1
        self._threads.put(thread)
        return ended("completed", answer=answer)

    # -- model steps --------------------------------------------------------------------

    def _model_step(
        self, step: int, thread: ThreadState, context: RunContext
    ) -> Generator[_Suspension, _Resume, ModelResponse]:
        for attempt in itertools.count():
            request = ModelRequest(
                system=self._system,
                messages=tuple(thread.messages),
                tools=tuple(tool.spec for tool in self.tools.values()),
                sections=self._sections(context),
            )
            try:
                return self._model_chain(f"{context.turn_index}.{step}.{attempt}", context)(request)
            except _Suspend as asked:
                resume = yield _Suspension("answer", asked.question)
                context.answer = resume.answer
        raise AssertionError("unreachable")

    def _sections(self, context: RunContext) -> tuple[PromptSection, ...]:
        sections: list[PromptSection] = []
        room = self._max_section_chars
        for middleware in self._hooks["prompt_section"]:
            section = middleware.prompt_section(context)
            if isinstance(section, Fail):
                raise _RunFailure(f"{middleware.id}: {section.reason}")
            if section is None or room <= 0:
                continue
            content = section.content[:room]
            room -= len(content)
            sections.append(PromptSection(section.title, content))
        return tuple(sections)

    def _model_chain(self, call_key: str, context: RunContext) -> ModelCall:
        calls = itertools.count()

        def call_model(request: ModelRequest) -> ModelResponse:
            # Journaled, so a recovered run gets the recorded reply instead of a new (and
            # differently worded, and paid-for) one; counted either way, once per call made.
            response = context.effect(
                "model.call",
                f"{call_key}.{next(calls)}",
                lambda: self._model.complete(request),
                replay_safe=True,
                encode=response_to_json,
                decode=response_from_json,
            )
            usage = response.usage
            context.record_usage(Usage(1, usage.input_tokens, usage.output_tokens))
            return response

        chain: ModelCall = call_model
        for middleware in reversed(self._hooks["wrap_model_call"]):
            chain = self._wrap_model(middleware, chain, context)
        return chain

    def _wrap_model(
        self, middleware: AgentMiddleware, inner: ModelCall, context: RunContext
    ) -> ModelCall:
        def wrapped(request: ModelRequest) -> ModelResponse:
            result = middleware.wrap_model_call(request, inner, context)
            if isinstance(result, Fail):
                raise _RunFailure(f"{middleware.id}: {result.reason}")
            if isinstance(result, Ask):
                if not isinstance(middleware, AskingMiddleware):
                    raise _RunFailure(
                        f"{middleware.id} asked a question, but only an AskingMiddleware may"
                    )
                raise _Suspend(result.question)
            return result.owned_by(middleware.id)

        return wrapped

    # -- tool calls ---------------------------------------------------------------------

    def _tool_step(
        self, call: ToolCall, thread: ThreadState, context: RunContext
    ) -> Generator[_Suspension, _Resume, Success | ToolError]:
        tool = self.tools.get(call.name)
        if tool is None:
            return ToolError(f"Unknown tool {call.name!r}; available: {sorted(self.tools)}")
        errors = schema_errors(dict(call.arguments), tool.spec.parameters)
        if errors:
            return ToolError("Invalid arguments: " + "; ".join(errors))
        try:
            for attempt in itertools.count():
                updates: list[tuple[str, Mapping[str, Any]]] = []
                key = f"{context.turn_index}.{call.id}.{attempt}"
                outcome = self._tool_chain(tool, key, context, updates)(call)
                if isinstance(outcome, Fatal):
                    raise _RunFailure(f"tool {call.name}: {outcome.reason}")
                if isinstance(outcome, NeedsApproval):
                    if context.approved:
                        raise _RunFailure(f"tool {call.name} asked again for an approved call")
                    resume = yield _Suspension("approval", outcome.reason)
                    if not resume.approved:
                        return ToolError(f"Denied: {outcome.reason} (not approved)")
                    context.approved = True
                    continue
                for owner, values in updates:
                    self._commit(thread, owner, values)
                return outcome
            raise AssertionError("unreachable")
        finally:
            context.approved = False

    def _tool_chain(
        self,
        tool: Tool,
        call_key: str,
        context: RunContext,
        updates: list[tuple[str, Mapping[str, Any]]],
    ) -> ToolNext:
        calls = itertools.count()

        def call_tool(call: ToolCall) -> ToolOutcome:
            # One journal entry per call through next: a wrapper's retry really runs again.
            return context.effect(
                "tool.call",
                f"{call_key}.{next(calls)}",
                lambda: _invoke(tool, call),
                replay_safe=tool.idempotent,
                encode=_outcome_to_json,
                decode=_outcome_from_json,
            )

        chain: ToolNext = call_tool
        for middleware in reversed(self._hooks["wrap_tool_call"]):
            chain = _wrap_tool(middleware, chain, context, updates)
        return chain

    # -- state --------------------------------------------------------------------------

    def _commit(self, thread: ThreadState, owner: str, update: Mapping[str, Any]) -> None:
        if not update:
            return
        allowed = self._by_id[owner].writes
        for key in update:
            if key not in allowed:
                raise _RunFailure(
                    f"middleware {owner!r} wrote state key {key!r}, which is not among its "
                    f"writes {sorted(allowed)}"
                )
        thread.state.update(update)


def _wrap_tool(
    middleware: AgentMiddleware,
    inner: ToolNext,
    context: RunContext,
    updates: list[tuple[str, Mapping[str, Any]]],
) -> ToolNext:
    def wrapped(call: ToolCall) -> ToolOutcome:
        seen: list[ToolOutcome] = []

        def next_call(next_call_arg: ToolCall) -> ToolOutcome:
            outcome = inner(next_call_arg)
            seen.append(outcome)
            return outcome

        outcome = middleware.wrap_tool_call(call, next_call, context)
        if isinstance(outcome, Success) and outcome.update and not any(outcome is s for s in seen):
            # The update is this wrapper's own; inner wrappers' were taken when they returned.
            updates.append((middleware.id, outcome.update))
            return Success(outcome.content)
        return outcome

    return wrapped


def _invoke(tool: Tool, call: ToolCall) -> ToolOutcome:
    try:
        return Success(str(tool.fn(**call.arguments)))
    except Exception as exc:  # noqa: BLE001 - a tool's failure is reported to the model
        return ToolError(f"{tool.name} failed: {exc}")


def _outcome_to_json(outcome: ToolOutcome) -> dict[str, Any]:
    if isinstance(outcome, Success):
        return {"kind": "success", "content": outcome.content}
    return {"kind": "error", "content": outcome.message if isinstance(outcome, ToolError) else ""}


def _outcome_from_json(data: Mapping[str, Any]) -> ToolOutcome:
    if data["kind"] == "success":
        return Success(data["content"])
    return ToolError(data["content"])
