"""A chat model behind any OpenAI-compatible API (OpenAI, Ollama's /v1, vLLM, LiteLLM...),
with tool calling.

Configured by MEMSTREAM_CHAT_BASE_URL, MEMSTREAM_CHAT_MODEL and, where the server wants one,
MEMSTREAM_CHAT_API_KEY. Timeouts and retries are `httpjson.post_json`'s; every failure is a
ModelProviderError saying what the server answered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from memstream.errors import ConfigurationError, ModelProviderError, ModelRefusedError
from memstream.llm import Message, ModelRequest, ModelResponse, ToolCall, Usage
from memstream.providers.httpjson import post_json

__all__ = ["OpenAICompatibleChat"]


class OpenAICompatibleChat:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "",
        timeout: float = 60.0,
        json_mode: str = "json_schema",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url or not model:
            raise ConfigurationError(
                "a chat model needs MEMSTREAM_CHAT_BASE_URL (e.g. http://127.0.0.1:11434/v1 "
                "for Ollama) and MEMSTREAM_CHAT_MODEL"
            )
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )
        self._model = model
        self._json_mode = json_mode

    def complete(self, request: ModelRequest) -> ModelResponse:
        body: dict[str, Any] = {"model": self._model, "messages": _messages(request)}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.parameters),
                    },
                }
                for tool in request.tools
            ]
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.answer_schema is not None and self._json_mode != "off":
            body["response_format"] = _answer_format(self._json_mode, request.answer_schema)
        reply = post_json(
            self._client,
            "/chat/completions",
            body,
            error=ModelProviderError,
            hint="check MEMSTREAM_CHAT_MODEL and MEMSTREAM_CHAT_API_KEY",
            refused=ModelRefusedError,
        )
        return _response(reply)

    def close(self) -> None:
        self._client.close()


def _answer_format(mode: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    # Constrained decoding where the server offers it: a model then answers the JSON asked
    # for. OpenAI's form, or the older one llama-cpp-python's server (and Anyscale) take.
    if mode == "json_object":
        return {"type": "json_object", "schema": dict(schema)}
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": dict(schema)}}


def _messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": request.system_prompt()}]
    for message in request.messages:
        item: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.tool_calls:
            item["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
                }
                for call in message.tool_calls
            ]
        if message.tool_call_id:
            item["tool_call_id"] = message.tool_call_id
        out.append(item)
    return out


def _response(reply: Any) -> ModelResponse:
    try:
        message = reply["choices"][0]["message"]
        calls = tuple(
            ToolCall(call["id"], call["function"]["name"], _arguments(call["function"]))
            for call in message.get("tool_calls") or ()
        )
        usage = reply.get("usage") or {}
        return ModelResponse(
            Message("assistant", message.get("content") or "", tool_calls=calls),
            Usage(1, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))),
        )
    except (KeyError, IndexError, TypeError) as exc:
        raise ModelProviderError(
            f"the chat endpoint answered something that is not a chat completion: {exc!r}"
        ) from exc


def _arguments(function: dict[str, Any]) -> dict[str, Any]:
    raw = function.get("arguments") or "{}"
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        # The model wrote broken JSON: hand it on so argument validation tells the model.
        return {"_unparsed_arguments": raw}
    return parsed if isinstance(parsed, dict) else {"_unparsed_arguments": raw}
