"""Threads: a conversation's messages, its committed middleware state, and its usage.

A thread's snapshot is plain JSON, so the journal can keep the thread as it was before a run
and a crashed run can be replayed from there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from memstream.agent.messages import Message, ToolCall, Usage

__all__ = ["InMemoryThreadStore", "ThreadState", "ThreadStore"]


@dataclass(slots=True)
class ThreadState:
    thread_id: str
    messages: list[Message] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    turns: int = 0

    def snapshot(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "messages": [asdict(m) for m in self.messages],
            "state": dict(self.state),
            "usage": asdict(self.usage),
            "turns": self.turns,
        }

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> ThreadState:
        messages = [
            Message(
                role=m["role"],
                content=m["content"],
                tool_calls=tuple(ToolCall(**c) for c in m["tool_calls"]),
                tool_call_id=m["tool_call_id"],
            )
            for m in data["messages"]
        ]
        return cls(
            data["thread_id"], messages, dict(data["state"]), Usage(**data["usage"]), data["turns"]
        )


class ThreadStore(Protocol):
    def get(self, thread_id: str) -> ThreadState: ...

    def put(self, thread: ThreadState) -> None: ...


class InMemoryThreadStore:
    def __init__(self) -> None:
        self._threads: dict[str, ThreadState] = {}

    def get(self, thread_id: str) -> ThreadState:
        return self._threads.setdefault(thread_id, ThreadState(thread_id))

    def put(self, thread: ThreadState) -> None:
        self._threads[thread.thread_id] = thread
