"""How the LangChain middleware shows recalled memories to the model."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import SystemMessage

from memstream.integrations.langchain import with_memory

MODEL = GenericFakeChatModel(messages=iter([]))


def request(system: SystemMessage | None, recalled: str | None) -> ModelRequest[Any]:
    state: dict[str, Any] = {"messages": []}
    if recalled is not None:
        state["semantic_memory"] = recalled
    return ModelRequest(model=MODEL, messages=[], system_message=system, state=state)  # type: ignore[arg-type]


def test_the_section_is_appended_and_existing_blocks_are_kept() -> None:
    cached = {"type": "text", "text": "Policy.", "cache_control": {"type": "ephemeral"}}
    system = SystemMessage(content=[{"type": "text", "text": "You are terse."}, cached])
    shown = with_memory(request(system, "- [2026-01-02, user] I like teal"))
    assert shown.system_message is not None
    blocks = shown.system_message.content_blocks
    assert blocks[:2] == system.content_blocks
    assert blocks[1].get("cache_control") == {"type": "ephemeral"}
    assert blocks[2]["text"] == "\n\n## semantic-memory\n- [2026-01-02, user] I like teal"  # type: ignore[typeddict-item]


def test_without_a_system_message_the_section_is_the_system_message() -> None:
    shown = with_memory(request(None, "- fact"))
    assert shown.system_message is not None
    assert shown.system_message.text == "## semantic-memory\n- fact"


def test_nothing_recalled_leaves_the_request_as_it_was() -> None:
    for recalled in (None, ""):
        original = request(SystemMessage("Hi."), recalled)
        assert with_memory(original) is original
