"""The MemoryStore contract, written once: each store implementation subclasses StoreContract
with `create_store` (and `settle`, for stores whose writes land later)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from memstream import InvalidInputError, TurnCompleted
from memstream.memory.model import MemoryType
from memstream.memory.store import MemoryFilter, MemoryStore

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


class StoreContract:
    __test__ = False

    def create_store(self, tenant: str) -> MemoryStore:
        raise NotImplementedError

    def settle(self, store: MemoryStore, expected: int) -> None:
        """Return once `store` holds `expected` memories (stores that apply in place do)."""

    def turn(
        self, store: MemoryStore, n: int, query: str, answer: str, thread: str = "t1"
    ) -> TurnCompleted:
        return TurnCompleted(
            tenant=store.tenant,
            thread=thread,
            run="run-1",
            turn=n,
            query=query,
            answer=answer,
            recorded_at=T0 + timedelta(hours=n),
            importance=0.5,
            embedding_model=store.embedding_model,
        )

    def tenant(self) -> str:
        return f"contract-{uuid.uuid4().hex[:8]}"

    def test_a_written_turn_is_listed_as_two_conversation_memories(self) -> None:
        store = self.create_store(self.tenant())
        event = self.turn(store, 1, "My dog is called Rex.", "Nice name.")
        outcome = store.write(event)
        self.settle(store, 2)
        memories = store.memories()
        assert outcome.event_id == event.id
        assert sorted(outcome.memory_ids) == sorted(m.id for m in memories)
        assert {(m.role, m.content) for m in memories} == {
            ("user", "My dog is called Rex."),
            ("assistant", "Nice name."),
        }
        assert {m.memory_type for m in memories} == {MemoryType.CONVERSATION}
        assert {m.tenant for m in memories} == {store.tenant}

    def test_search_ranks_the_relevant_memory_first(self) -> None:
        store = self.create_store(self.tenant())
        store.write(self.turn(store, 1, "I play the cello every Sunday.", "Lovely."))
        store.write(self.turn(store, 2, "My flat is in Lisbon near the river.", "Sounds nice."))
        self.settle(store, 4)
        hits = store.search("which city do I live in?", k=4)
        assert hits[0].memory.content == "My flat is in Lisbon near the river."
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    def test_memories_filter_by_thread_and_time_oldest_first(self) -> None:
        store = self.create_store(self.tenant())
        store.write(self.turn(store, 1, "first question", "first answer", thread="a"))
        store.write(self.turn(store, 3, "second question", "second answer", thread="b"))
        self.settle(store, 4)
        assert {m.thread for m in store.memories(MemoryFilter(thread="b"))} == {"b"}
        early = store.memories(MemoryFilter(before=T0 + timedelta(hours=2)))
        assert {m.content for m in early} == {"first question", "first answer"}
        timestamps = [m.timestamp for m in store.memories()]
        assert timestamps == sorted(timestamps)

    def test_writing_the_same_event_twice_leaves_its_memories_once(self) -> None:
        store = self.create_store(self.tenant())
        event = self.turn(store, 1, "I take my coffee black.", "Noted.")
        store.write(event)
        store.write(event)
        store.write(self.turn(store, 2, "after the duplicate", "ok"))
        self.settle(store, 4)
        assert len(store.memories()) == 4

    def test_a_store_refuses_another_tenants_event_and_never_shows_it(self) -> None:
        mine, theirs = self.create_store(self.tenant()), self.create_store(self.tenant())
        with pytest.raises(InvalidInputError, match="reached"):
            mine.write(self.turn(theirs, 1, "their secret", "kept"))
        theirs.write(self.turn(theirs, 1, "their secret", "kept"))
        self.settle(theirs, 2)
        assert mine.memories() == []
        assert mine.search("secret", k=5) == []
