"""What the manager puts in the semantic-memory section: sections by type, whole memories."""

from datetime import UTC, datetime, timedelta

from memstream import MemoryType, RecalledMemory
from memstream.agent import ScriptedModel
from memstream.memory.manager import LLMMemoryManager, MemoryManagerConfig, prompt_context
from memstream.memory.model import Memory

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Found:
    """A store whose search returns fixed hits (the store contract is tested elsewhere)."""

    tenant = "acme"
    embedding_model = "m@1"
    transactional = False

    def __init__(self, memories: list[Memory]) -> None:
        self._hits = [RecalledMemory(m, 1.0 - i / 100) for i, m in enumerate(memories)]

    def search(self, query: str, *, k: int) -> list[RecalledMemory]:
        return self._hits[:k]


def memory(i: int, content: str, kind: MemoryType = MemoryType.CONVERSATION) -> Memory:
    return Memory(
        f"m{i}", "acme", content, kind, "t", T0 + timedelta(days=i), 0.5, "e", role="user"
    )


def context(memories: list[Memory], max_chars: int) -> str:
    manager = LLMMemoryManager(MemoryManagerConfig(), Found(memories), ScriptedModel([]))  # type: ignore[arg-type]
    return manager.get_relevant_context("q", max_chars)


def test_facts_come_first_and_each_type_has_its_section() -> None:
    text = context([memory(1, "we chatted"), memory(2, "likes tea", MemoryType.USER_FACT)], 500)
    assert text == (
        "### What the user told about themselves\n- [2026-01-03, user] likes tea\n\n"
        "### Earlier conversations\n- [2026-01-02, user] we chatted"
    )


def test_events_and_other_memories_come_before_what_was_said() -> None:
    """What extraction derives (an event is a custom memory) is shown before raw turns, which
    the budget cuts first."""
    said, event = memory(1, "we chatted"), memory(2, "moved on 2026-01-02", MemoryType.CUSTOM)
    text = context([said, event], 500)
    assert text.index("### Events and other memories") < text.index("### Earlier conversations")
    assert context([said, event], len(text) - 1) == (
        "### Events and other memories\n- [2026-01-03, user] moved on 2026-01-02"
    )


def test_only_whole_memories_fit_the_budget() -> None:
    memories = [memory(1, "a" * 30), memory(2, "b" * 30)]
    full = context(memories, 1000)
    text = context(memories, len(full) - 1)
    assert text == "### Earlier conversations\n- [2026-01-02, user] " + "a" * 30


def test_a_first_memory_too_long_for_the_budget_is_cut_not_dropped() -> None:
    text = context([memory(1, "x" * 500)], 60)
    assert len(text) == 60 and text.startswith("### Earlier conversations\n- [2026-01-02")


def test_a_superseded_fact_is_shown_with_until_when_it_held() -> None:
    held = memory(1, "lives in Berlin", MemoryType.USER_FACT)
    hits = [RecalledMemory(held, 0.9, valid_to=T0 + timedelta(days=40))]
    assert prompt_context(hits, 500).text == (
        "### What the user told about themselves\n"
        "- [2026-01-02, user] lives in Berlin (until 2026-02-10)"
    )
