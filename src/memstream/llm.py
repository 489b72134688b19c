"""The model-call vocabulary: messages, tool calls, model requests and responses, usage, and
the one protocol a model client implements.

A leaf module: the agent runtime, the memory domain (which asks a model for importance and
summaries) and the providers all speak it, and it imports nothing of theirs. All values are
frozen: a middleware that rewrites a request builds a new one with `dataclasses.replace`, so
no hook can change what another hook already saw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "Message",
    "ModelClient",
    "ModelRequest",
    "ModelResponse",
    "PromptSection",
    "StateUpdate",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "estimate_tokens",
    "response_from_json",
    "response_to_json",
]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool: its name, purpose and JSON-schema parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@dataclass(frozen=True, slots=True)
class PromptSection:
    """A titled block of a model request's system prompt, contributed by a middleware."""

    title: str
    content: str

    def render(self) -> str:
        return f"## {self.title}\n{self.content}"


@dataclass(frozen=True, slots=True)
class Usage:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.calls + other.calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
        )


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What a model is asked. `answer_schema`: the JSON Schema its answer must follow (a
    provider that can constrain decoding to it does; the caller checks the answer anyway);
    `max_tokens` and `temperature`: None leaves them to the provider."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    sections: tuple[PromptSection, ...] = ()
    answer_schema: Mapping[str, Any] | None = None
    max_tokens: int | None = None
    temperature: float | None = None

    def system_prompt(self) -> str:
        """The system prompt as sent: the agent's instructions, then each section."""
        return "\n\n".join([self.system, *(s.render() for s in self.sections)]).strip()


@dataclass(frozen=True, slots=True)
class StateUpdate:
    """State writes added to a response; `owner` is filled in by the runtime with the id of the
    wrapper that added it, so a wrapper cannot write under another middleware's name."""

    values: Mapping[str, Any]
    owner: str = ""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A model's reply, with the state writes wrappers added to it (`add_update`)."""

    message: Message
    usage: Usage = Usage()
    updates: tuple[StateUpdate, ...] = ()

    def add_update(self, update: Mapping[str, Any]) -> ModelResponse:
        return dataclasses.replace(self, updates=(*self.updates, StateUpdate(dict(update))))

    def owned_by(self, owner: str) -> ModelResponse:
        """This response with every unowned update attributed to `owner`."""
        updates = tuple(u if u.owner else StateUpdate(u.values, owner) for u in self.updates)
        return dataclasses.replace(self, updates=updates)


def response_to_json(response: ModelResponse) -> dict[str, Any]:
    """A model response as JSON, for the journal (state updates are not part of a model's
    reply: wrappers add them after the call)."""
    return {
        "message": dataclasses.asdict(response.message),
        "usage": dataclasses.asdict(response.usage),
    }


def response_from_json(data: Mapping[str, Any]) -> ModelResponse:
    message = data["message"]
    return ModelResponse(
        Message(
            role=message["role"],
            content=message["content"],
            tool_calls=tuple(ToolCall(**call) for call in message["tool_calls"]),
            tool_call_id=message["tool_call_id"],
        ),
        Usage(**data["usage"]),
    )


class ModelClient(Protocol):
    """The model-call seam: the only thing the runtime and the memory manager ask of a model."""

    def complete(self, request: ModelRequest) -> ModelResponse: ...


def estimate_tokens(text: str) -> int:
    """A provider-free token estimate (about four characters a token, as the seed budgets)."""
    return (len(text) + 3) // 4
