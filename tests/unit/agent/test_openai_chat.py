"""The OpenAI-compatible chat client's wire format and errors, over httpx's mock transport."""

import json

import httpx
import pytest

from memstream.agent import Message, ModelRequest, PromptSection, ToolCall, ToolSpec, Usage
from memstream.errors import ConfigurationError, ModelProviderError
from memstream.providers.openai_chat import OpenAICompatibleChat

REQUEST = ModelRequest(
    system="Be kind.",
    messages=(
        Message("user", "weather in Oslo?"),
        Message("assistant", "", tool_calls=(ToolCall("c1", "weather", {"city": "Oslo"}),)),
        Message("tool", "sunny", tool_call_id="c1"),
    ),
    tools=(ToolSpec("weather", "the weather", {"type": "object"}),),
    sections=(PromptSection("semantic-memory", "user lives in Oslo"),),
)


def chat(*answers: httpx.Response) -> tuple[OpenAICompatibleChat, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    client = OpenAICompatibleChat(
        "http://llm.test/v1", "llama3", api_key="k", transport=httpx.MockTransport(handle)
    )
    return client, seen


def completion(message: dict[str, object]) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "choices": [{"message": message}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 4},
        },
    )


def test_the_request_carries_system_sections_messages_and_tools() -> None:
    client, seen = chat(completion({"role": "assistant", "content": "It is sunny."}))
    response = client.complete(REQUEST)
    assert response.message == Message("assistant", "It is sunny.")
    assert response.usage == Usage(1, 12, 4)
    body = json.loads(seen[0].content)
    assert seen[0].url == "http://llm.test/v1/chat/completions"
    assert body["model"] == "llama3"
    assert body["messages"][0] == {
        "role": "system",
        "content": "Be kind.\n\n## semantic-memory\nuser lives in Oslo",
    }
    assert body["messages"][2]["tool_calls"][0]["function"] == {
        "name": "weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert body["messages"][3] == {"role": "tool", "content": "sunny", "tool_call_id": "c1"}
    assert body["tools"][0]["function"]["name"] == "weather"


def test_tool_calls_in_the_reply_are_parsed_and_broken_json_is_passed_on() -> None:
    calls = [
        {
            "id": "a",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "Rome"}'},
        },
        {"id": "b", "type": "function", "function": {"name": "weather", "arguments": "{oops"}},
    ]
    client, _ = chat(completion({"role": "assistant", "content": None, "tool_calls": calls}))
    message = client.complete(REQUEST).message
    assert message.content == ""
    assert message.tool_calls == (
        ToolCall("a", "weather", {"city": "Rome"}),
        ToolCall("b", "weather", {"_unparsed_arguments": "{oops"}),
    )


def test_busy_answers_are_retried_honouring_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr("time.sleep", waits.append)
    client, seen = chat(
        httpx.Response(429, headers={"retry-after": "2"}),
        completion({"role": "assistant", "content": "ok"}),
    )
    assert client.complete(REQUEST).message.content == "ok"
    assert waits == [2.0] and len(seen) == 2


def test_errors_say_what_the_server_said() -> None:
    client, _ = chat(httpx.Response(401, text="bad key"))
    with pytest.raises(
        ModelProviderError, match="answered 401: bad key; check MEMSTREAM_CHAT_MODEL"
    ):
        client.complete(REQUEST)
    client, _ = chat(httpx.Response(200, json={"nope": 1}))
    with pytest.raises(ModelProviderError, match="not a chat completion"):
        client.complete(REQUEST)


def test_missing_configuration_names_the_variables() -> None:
    with pytest.raises(ConfigurationError, match="MEMSTREAM_CHAT_BASE_URL"):
        OpenAICompatibleChat("", "")
