"""The middleware contract: the hooks a middleware may implement and what each may return.

A middleware subclasses `AgentMiddleware`, sets `id`, `writes` (the state keys its hooks may
write) and `runs_before` (ids of middleware it must run outside of), and overrides any of:

    before_agent(input, context)            -> Proceed(input?, update) | Block(reason)
    prompt_section(context)                 -> PromptSection | None | Fail(reason)
    wrap_model_call(request, next, context) -> ModelResponse | Fail(reason) | Ask(question)*
    wrap_tool_call(call, next, context)     -> Success | ToolError | NeedsApproval | Fatal
    after_agent(turn, context)              -> Proceed(update) | Block(reason)

    * only an `AskingMiddleware` may ask; an Ask from any other wrapper fails the run.

The stack runs before_agent, prompt_section and the wrappers in stack order (the first is the
outermost wrapper), and after_agent in reverse. Hook names are checked when a middleware is
registered, so a misspelt hook is an error rather than a hook that silently never runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memstream.errors import ConfigurationError
from memstream.llm import ModelRequest, ModelResponse, PromptSection, ToolCall

if TYPE_CHECKING:
    from memstream.agent.context import RunContext

__all__ = [
    "HOOKS",
    "AgentMiddleware",
    "Ask",
    "AskingMiddleware",
    "Block",
    "Fail",
    "Fatal",
    "ModelCall",
    "NeedsApproval",
    "Proceed",
    "Success",
    "ToolError",
    "ToolNext",
    "ToolOutcome",
    "Turn",
    "check_middleware",
]


@dataclass(frozen=True, slots=True)
class Proceed:
    """Go on; `input` replaces the run's input (before_agent only), `update` is committed."""

    input: str | None = None
    update: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Block:
    """Stop the run without an answer; the thread's state is restored to before the turn."""

    reason: str


@dataclass(frozen=True, slots=True)
class Fail:
    """Fail the run with an error."""

    reason: str


@dataclass(frozen=True, slots=True)
class Ask:
    """Suspend the run until the question is answered (`Agent.resume(run_id, answer=...)`)."""

    question: str


@dataclass(frozen=True, slots=True)
class Success:
    content: str
    update: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolError:
    """The tool call failed or was denied; the model sees `message` and may go on."""

    message: str


@dataclass(frozen=True, slots=True)
class NeedsApproval:
    """Suspend the run until a person approves or denies the call (`Agent.resume`)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Fatal:
    """Fail the run from a tool call."""

    reason: str


ToolOutcome = Success | ToolError | NeedsApproval | Fatal
ModelCall = Callable[[ModelRequest], ModelResponse]
ToolNext = Callable[[ToolCall], ToolOutcome]


@dataclass(frozen=True, slots=True)
class Turn:
    """What after_agent sees: the turn's (possibly rewritten) input and its final answer."""

    input: str
    answer: str


class AgentMiddleware:
    id: str = ""
    writes: frozenset[str] = frozenset()
    runs_before: frozenset[str] = frozenset()

    def before_agent(self, input: str, context: RunContext) -> Proceed | Block:
        return Proceed()

    def prompt_section(self, context: RunContext) -> PromptSection | Fail | None:
        return None

    def wrap_model_call(
        self, request: ModelRequest, next: ModelCall, context: RunContext
    ) -> ModelResponse | Fail | Ask:
        return next(request)

    def wrap_tool_call(self, call: ToolCall, next: ToolNext, context: RunContext) -> ToolOutcome:
        return next(call)

    def after_agent(self, turn: Turn, context: RunContext) -> Proceed | Block:
        return Proceed()

    def overrides(self, hook: str) -> bool:
        """Whether this middleware implements `hook` (the runtime skips the others)."""
        return getattr(type(self), hook) is not getattr(AgentMiddleware, hook)


class AskingMiddleware(AgentMiddleware):
    """A middleware whose wrap_model_call may return Ask and so suspend the run."""


HOOKS = frozenset(
    {"before_agent", "prompt_section", "wrap_model_call", "wrap_tool_call", "after_agent"}
)
_HOOK_PREFIXES = ("before_", "after_", "wrap_", "prompt_")


def check_middleware(middleware: AgentMiddleware) -> None:
    """Refuse a middleware with no id, malformed key sets, or a method that looks like a hook
    but is none (a typo would otherwise never run)."""
    name = type(middleware).__name__
    if not isinstance(middleware, AgentMiddleware):
        raise ConfigurationError(f"{name} is not an AgentMiddleware")
    if not isinstance(middleware.id, str) or not middleware.id:
        raise ConfigurationError(f"{name} has no id; give it a stable, unique `id`")
    for attribute in ("writes", "runs_before"):
        value = getattr(middleware, attribute)
        if not isinstance(value, frozenset) or not all(isinstance(v, str) for v in value):
            raise ConfigurationError(f"{middleware.id}.{attribute} must be a frozenset of str")
    for attribute in dir(type(middleware)):
        if attribute.startswith(_HOOK_PREFIXES) and attribute not in HOOKS:
            raise ConfigurationError(
                f"{middleware.id} defines {attribute!r}, which is not a hook; "
                f"hooks are {sorted(HOOKS)}"
            )
