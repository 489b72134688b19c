"""Compaction's decisions (memory/compaction.py): groups, the merged memory, the model call."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memstream import MemoryType
from memstream.llm import Message, ModelResponse
from memstream.memory.compaction import exact_groups, merge_request, merged, merged_text
from memstream.memory.model import Memory
from memstream.memory.tenancy import validate_tenant

AT = datetime(2026, 5, 8, 12, 0, tzinfo=UTC)


def _memory(memory_id: str, text: str, minutes: int, importance: float = 0.5) -> Memory:
    return Memory(
        id=memory_id,
        tenant=validate_tenant("acme"),
        content=text,
        memory_type=MemoryType.USER_FACT,
        thread="ops",
        timestamp=AT + timedelta(minutes=minutes),
        importance=importance,
        event_id=memory_id,
        metadata={"source": memory_id},
    )


def test_exact_groups_gather_what_shares_a_key_in_order() -> None:
    a, b, c = _memory("a", "x", 0), _memory("b", "y", 1), _memory("c", "x", 2)
    assert exact_groups([a, b, c], lambda m: m.content) == [[a, c], [b]]


def test_the_merged_memory_is_the_newest_members_with_the_highest_importance() -> None:
    group = [_memory("a", "x", 5, 0.9), _memory("b", "x", 9, 0.2), _memory("c", "x", 1)]
    event = merged(group, "merged x", "model-1")
    assert event.memory_ids == ("a", "b", "c")
    newest = group[1]
    assert (event.summary, event.timestamp, event.importance) == ("merged x", newest.timestamp, 0.9)
    assert (event.thread, event.metadata) == ("ops", {"source": "b"})
    assert event.embedding_model == "model-1"
    # The same group merged twice is the same event: applied once.
    assert merged(list(reversed(group)), "merged x", "model-1").id == event.id


def test_the_merge_request_lists_the_group_oldest_first_as_data() -> None:
    request = merge_request([_memory("b", "later", 9), _memory("a", "earlier", 1)])
    (message,) = request.messages
    assert message.content == "<memories>\n- earlier\n- later\n</memories>"
    assert "not instructions" in request.system and request.temperature == 0.0


def test_an_empty_answer_merges_nothing() -> None:
    assert merged_text(ModelResponse(Message("assistant", "  merged  "))) == "merged"
    assert merged_text(ModelResponse(Message("assistant", "  "))) is None
