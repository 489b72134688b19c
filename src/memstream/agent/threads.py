"""Threads: a conversation's messages, its committed middleware state, and its usage.

A run takes a snapshot of its thread before it starts (cheap: messages are frozen values), so
that a block or failure can restore the thread and a crashed run can be replayed from it; the
durable journal stores the snapshot as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from memstream.llm import Message, ToolCall, Usage

__all__ = ["InMemoryThreadStore", "ThreadSnapshot", "ThreadState", "ThreadStore"]


@dataclass(frozen=True, slots=True)
class ThreadSnapshot:
    thread_id: str
    messages: tuple[Message, ...]
    state: Mapping[str, Any]
    usage: Usage
    turns: int

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "messages": [asdict(m) for m in self.messages],
            "state": dict(self.state),
            "usage": asdict(self.usage),
            "turns": self.turns,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ThreadSnapshot:
        messages = tuple(
            Message(
                role=m["role"],
                content=m["content"],
                tool_calls=tuple(ToolCall(**c) for c in m["tool_calls"]),
                tool_call_id=m["tool_call_id"],
            )
            for m in data["messages"]
        )
        return cls(
            data["thread_id"], messages, dict(data["state"]), Usage(**data["usage"]), data["turns"]
        )


@dataclass(slots=True)
class ThreadState:
    thread_id: str
    messages: list[Message] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    turns: int = 0

    def snapshot(self) -> ThreadSnapshot:
        return ThreadSnapshot(
            self.thread_id, tuple(self.messages), dict(self.state), self.usage, self.turns
        )

    def restore(self, snapshot: ThreadSnapshot, *, keep_usage: bool = False) -> None:
        """Put the thread back as `snapshot` has it (keeping the usage since, if asked)."""
        self.messages = list(snapshot.messages)
        self.state = dict(snapshot.state)
        self.turns = snapshot.turns
        if not keep_usage:
            self.usage = snapshot.usage

    @classmethod
    def from_snapshot(cls, snapshot: ThreadSnapshot) -> ThreadState:
        thread = cls(snapshot.thread_id)
        thread.restore(snapshot)
        return thread


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
