"""The deterministic models that ship with the runtime (the seam itself, `ModelClient`, is in
memstream.llm).

`ScriptedModel` replays a script (for tests: it also keeps every request it was sent);
`OfflineEchoModel` answers without any model at all, deterministically, from the request it
gets (for the offline demo). The OpenAI-compatible HTTP client is a provider
(memstream.providers.openai_chat).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from memstream.errors import InvalidInputError
from memstream.llm import Message, ModelRequest, ModelResponse, Usage, estimate_tokens

__all__ = ["OfflineEchoModel", "ScriptedModel"]


def _usage(request: ModelRequest, answer: str) -> Usage:
    prompt = request.system_prompt() + "".join(m.content for m in request.messages)
    return Usage(
        calls=1, input_tokens=estimate_tokens(prompt), output_tokens=estimate_tokens(answer)
    )


Reply = str | Message | ModelResponse | Callable[[ModelRequest], "str | Message | ModelResponse"]


class ScriptedModel:
    """Answers with the next reply of its script; `requests` holds every request it got."""

    def __init__(self, replies: Iterable[Reply]) -> None:
        self._replies = list(replies)
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if len(self.requests) > len(self._replies):
            raise InvalidInputError(
                f"the scripted model has {len(self._replies)} replies and was called "
                f"{len(self.requests)} times; add replies to the script"
            )
        reply = self._replies[len(self.requests) - 1]
        if callable(reply):
            reply = reply(request)
        if isinstance(reply, ModelResponse):
            return reply
        message = reply if isinstance(reply, Message) else Message("assistant", reply)
        return ModelResponse(message, _usage(request, message.content))


class OfflineEchoModel:
    """No model at all: repeats the user's last message and what its prompt sections hold.

    Deterministic, so the offline demo shows exactly what memory put into the prompt.
    """

    def complete(self, request: ModelRequest) -> ModelResponse:
        last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        lines = [f"(offline model: no LLM is configured) You said: {last}"]
        for section in request.sections:
            lines.append(f"From my {section.title} section:\n{section.content}")
        answer = "\n".join(lines)
        return ModelResponse(Message("assistant", answer), _usage(request, answer))
