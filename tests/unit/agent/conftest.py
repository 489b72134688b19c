from __future__ import annotations

from memstream.agent import Message, RunConfig, ToolCall

CONFIG = RunConfig(thread_id="t1", tenant_id="acme")


def calls(*pairs: tuple[str, dict[str, object]]) -> Message:
    """An assistant message asking for tool calls."""
    return Message(
        "assistant", "", tool_calls=tuple(ToolCall(f"c{i}", n, a) for i, (n, a) in enumerate(pairs))
    )
