"""The MemoryStore contract, written once: each store implementation subclasses StoreContract
with `create_store` (and `settle`, for stores whose writes land later).

It is the specification of applying events — forget by id, thread, time and all; tombstones;
a consolidation skipped whole when a member is gone; the eviction order — so the Python
(in-process) and the Lua (Redis projection) semantics cannot drift apart."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from memstream import MemoriesConsolidated, MemoryForgotten, TenantErased, TurnCompleted
from memstream.errors import InvalidInputError
from memstream.memory.events import ITEM_VALUE, ItemExpired, ItemStored
from memstream.memory.model import MemoryType
from memstream.memory.store import MemoryFilter, MemoryStore

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


class StoreContract:
    __test__ = False

    # Each tenant's bound in the stores `create_store` makes.
    bound = 40
    # Whether the store's memories come from a log (and so know their log position).
    logged = False

    def create_store(self, tenant: str) -> MemoryStore:
        raise NotImplementedError

    def settle_until(self, store: MemoryStore, condition: Callable[[], bool], what: str) -> None:
        """Return once `condition` holds (a store that applies in place: at once)."""
        assert condition(), what

    def settle(self, store: MemoryStore, expected: int) -> None:
        """Return once `store` holds `expected` memories."""
        self.settle_until(store, lambda: len(store.memories()) == expected, f"{expected} memories")

    def turn(
        self,
        store: MemoryStore,
        n: int,
        query: str,
        answer: str,
        thread: str = "t1",
        importance: float = 0.5,
    ) -> TurnCompleted:
        return TurnCompleted(
            tenant=store.tenant,
            thread=thread,
            run="run-1",
            turn=n,
            query=query,
            answer=answer,
            recorded_at=T0 + timedelta(hours=n),
            importance=importance,
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

    def forget(self, store: MemoryStore, **selection: object) -> MemoryForgotten:
        at = T0 + timedelta(days=30)
        return MemoryForgotten(store.tenant, uuid.uuid4().hex, at, **selection)  # type: ignore[arg-type]

    def contents(self, store: MemoryStore) -> set[str]:
        return {m.content for m in store.memories()}

    def test_forget_by_id_deletes_and_tombstones_it_for_good(self) -> None:
        store = self.create_store(self.tenant())
        event = self.turn(store, 1, "My locker code is 4411.", "Noted.")
        store.write(event)
        self.settle(store, 2)
        (question,) = [m.id for m in store.memories() if m.role == "user"]
        store.write(self.forget(store, memory_ids=(question,)))
        self.settle(store, 1)
        store.write(event)  # a redelivery, a re-import, a replay: it stays forgotten
        store.write(self.turn(store, 2, "after the forget", "ok"))
        self.settle(store, 3)
        assert self.contents(store) == {"Noted.", "after the forget", "ok"}

    @pytest.mark.parametrize(
        ("selection", "kept"),
        [
            ({"thread": "a"}, {"b early", "b early answer", "b late", "b late answer"}),
            (
                {"before": T0 + timedelta(hours=20)},
                {"a late", "a late answer", "b late", "b late answer"},
            ),
            (
                {"thread": "a", "before": T0 + timedelta(hours=20)},
                {"a late", "a late answer", "b early", "b early answer", "b late",
                 "b late answer"},
            ),
            ({"everything": True}, set()),
        ],
    )  # fmt: skip
    def test_forget_by_thread_time_both_or_everything(
        self, selection: dict[str, object], kept: set[str]
    ) -> None:
        store = self.create_store(self.tenant())
        for n, (thread, when) in enumerate([("a", 1), ("b", 1), ("a", 3), ("b", 3)]):
            label = f"{thread} {'early' if when == 1 else 'late'}"
            store.write(self.turn(store, when * 10 + n, label, f"{label} answer", thread=thread))
        self.settle(store, 8)
        store.write(self.forget(store, **selection))
        self.settle(store, len(kept))
        assert self.contents(store) == kept

    def test_an_erasure_deletes_the_tenant_and_its_tombstones_and_it_may_start_over(
        self,
    ) -> None:
        store = self.create_store(self.tenant())
        first = self.turn(store, 1, "My locker code is 4411.", "Noted.")
        store.write(first)
        store.write(self.turn(store, 2, "second", "two"))
        self.settle(store, 4)
        (question,) = [m.id for m in store.memories() if m.content == "second"]
        store.write(self.forget(store, memory_ids=(question,)))
        self.settle(store, 3)
        store.write(TenantErased(store.tenant, uuid.uuid4().hex, T0 + timedelta(days=1)))
        self.settle(store, 0)
        # Tombstones went with it: a replay of the log (whose sealed content is unreadable)
        # holds none, so neither does the live projection. New turns are recorded afresh.
        store.write(self.turn(store, 3, "second", "two again"))
        self.settle(store, 2)
        assert self.contents(store) == {"second", "two again"}

    def test_an_expiry_removes_the_item_only_while_it_holds_the_put_that_lapsed(self) -> None:
        store = self.create_store(self.tenant())

        def put(n: int) -> ItemStored:
            return ItemStored(
                tenant=store.tenant,
                namespace=(store.tenant, "prefs"),
                key="colour",
                put_id=f"put-{n}",
                value=f'{{"n": {n}}}',
                texts=(f"colour {n}",),
                recorded_at=T0 + timedelta(hours=n),
                importance=0.5,
                embedding_model=store.embedding_model,
                ttl_minutes=5.0,
            )

        def expiry(lapsed: ItemStored, deadline: datetime) -> ItemExpired:
            return ItemExpired(
                tenant=store.tenant,
                namespace=lapsed.namespace,
                key=lapsed.key,
                put_event_id=lapsed.id,
                deadline=deadline,
                expired_at=deadline + timedelta(seconds=1),
            )

        first, second = put(1), put(2)
        assert first.expires_at is not None and second.expires_at is not None
        store.write(first)
        # The sweeper saw an earlier deadline than the item's (a refresh came in between).
        store.write(expiry(first, first.expires_at - timedelta(minutes=1)))
        store.write(second)
        store.write(expiry(first, first.expires_at))  # a put came in between
        store.write(self.turn(store, 3, "marker", "applied after the expiries"))
        self.settle(store, 3)
        (item,) = [m for m in store.memories() if ITEM_VALUE in m.metadata]
        assert item.metadata[ITEM_VALUE] == '{"n": 2}'
        store.write(expiry(second, second.expires_at))
        self.settle(store, 2)
        assert self.contents(store) == {"marker", "applied after the expiries"}

    def test_a_consolidation_replaces_its_group_with_the_summary(self) -> None:
        store = self.create_store(self.tenant())
        store.write(self.turn(store, 1, "We deploy on Tuesdays.", "Got it."))
        store.write(self.turn(store, 2, "Keep the other one.", "Sure."))
        self.settle(store, 4)
        group = tuple(m.id for m in store.memories() if m.timestamp == T0 + timedelta(hours=1))
        store.write(self.summary(store, group, "Deploys happen on Tuesdays."))
        self.settle(store, 3)
        assert self.contents(store) == {
            "Deploys happen on Tuesdays.",
            "Keep the other one.",
            "Sure.",
        }

    def test_a_consolidation_whose_member_was_forgotten_is_skipped_whole(self) -> None:
        store = self.create_store(self.tenant())
        store.write(self.turn(store, 1, "The vault opens at nine.", "Right."))
        self.settle(store, 2)
        group = tuple(m.id for m in store.memories())
        store.write(self.forget(store, memory_ids=group[:1]))
        store.write(self.summary(store, group, "never written"))
        store.write(self.turn(store, 2, "a later turn", "ok"))
        self.settle(store, 3)
        assert "never written" not in self.contents(store)
        assert len(self.contents(store) & {"The vault opens at nine.", "Right."}) == 1

    def test_every_memory_says_which_event_made_it_and_a_summary_what_it_replaced(self) -> None:
        store = self.create_store(self.tenant())
        first = self.turn(store, 1, "We deploy on Tuesdays.", "Got it.")
        store.write(first)
        self.settle(store, 2)
        for memory in store.memories():
            p = memory.provenance
            assert p is not None
            assert (p.event_id, p.event_type, p.event_version) == (first.id, "TurnCompleted", 3)
            assert (p.thread, p.run, p.turn, p.recorded_at) == ("t1", "run-1", 1, first.recorded_at)
            assert p.replaced == ()
            # Only a store fed by a log knows a log position.
            assert p.in_log is self.logged and (p.topic != "") is self.logged
        group = tuple(m.id for m in store.memories())
        summary = self.summary(store, group, "Deploys happen on Tuesdays.")
        store.write(summary)
        self.settle(store, 1)
        (kept,) = store.memories()
        assert kept.provenance is not None
        assert kept.provenance.event_id == summary.id
        assert kept.provenance.event_type == "MemoriesConsolidated"
        assert kept.provenance.replaced == tuple(sorted(group))
        assert (kept.provenance.run, kept.provenance.turn) == ("", None)

    def summary(
        self, store: MemoryStore, group: tuple[str, ...], text: str
    ) -> MemoriesConsolidated:
        return MemoriesConsolidated(
            store.tenant, group, text, MemoryType.CONVERSATION, "t1", T0 + timedelta(hours=1),
            0.5, store.embedding_model,
        )  # fmt: skip

    def test_every_write_evicts_the_least_important_then_the_oldest_beyond_the_bound(
        self,
    ) -> None:
        store = self.create_store(self.tenant())
        turns = self.bound // 2
        for n in range(turns):
            store.write(self.turn(store, n, f"q{n}", f"a{n}"))
        self.settle(store, self.bound)
        # Newest, yet least important: the first to go.
        store.write(self.turn(store, 100, "trivia", "trivia answer", importance=0.1))
        store.write(self.turn(store, 101, "vital", "vital answer", importance=0.9))
        # Two writes of two memories each over the bound: four evicted, the trivia first,
        # then the oldest of equal importance.
        self.settle_until(store, lambda: "vital" in self.contents(store), "the last write")
        expected = {f"{side}{n}" for n in range(1, turns) for side in "qa"}
        assert self.contents(store) == expected | {"vital", "vital answer"}
