"""The projection backend contract, written once: each `ProjectionBackend` implementation
subclasses BackendContract with `make_backend` (a fresh, empty namespace with `bound` memories
per tenant; the suite drops it after each test) and, for a sharded one, `partition_of`.

Every test goes through the protocol only (`memstream.backends.ProjectionBackend` and the
ports it hands out), events applied as the worker applies them (`memstream.testing.memory.
aproject`: encoded, decoded, embedded, applied through the writer). Where backends may differ
— a ranking's scores, the order of ties — it asserts what every backend must do: what is found
and what is not, and an order only where the ranking determines it.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import ClassVar

import pytest

from memstream import MemoriesConsolidated, MemoryForgotten, TenantErased, TurnCompleted
from memstream.agent.journal import RunRecord, run_effect
from memstream.agent.threads import ThreadSnapshot
from memstream.backends import ProjectionBackend
from memstream.config import Settings
from memstream.errors import ConfigurationError, InvalidInputError, StaleSessionError
from memstream.llm import Usage
from memstream.memory.embeddings import Embedders
from memstream.memory.events import (
    NAMESPACE_NAMES,
    NAMESPACES,
    TASKS,
    VIEWS,
    ExtractedFact,
    FactKind,
    ItemExpired,
    ItemStored,
    MemoriesExtracted,
    MemoryEvent,
    MessageRecorded,
    NamespaceCreated,
    NamespaceRemoved,
    NamespaceUpdated,
    PartitionSummarised,
    SummaryRunRequested,
    SummaryViewDefined,
    SummaryViewRemoved,
    memories_of,
    memory_ids_of,
    results_of,
)
from memstream.memory.model import MemoryType
from memstream.memory.ports import (
    AppliedOutcome,
    Embedded,
    Position,
    PositionsBehind,
    ProcessReport,
    SwapResult,
)
from memstream.memory.ranking.fusion import RecallTuning
from memstream.memory.search import SearchFilter, SearchMode
from memstream.memory.store import MemoryFilter
from memstream.providers import EmbedderCatalogue
from memstream.providers.minilm import MiniLMEmbedder
from memstream.streams.topics import Topics
from memstream.testing.memory import aproject

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
TUNING = RecallTuning(
    vector_weight=1.0,
    importance_weight=0.0,
    recency_weight=0.0,
    recency_half_life_days=30.0,
    duplicate_similarity=0.97,
    # Thread neighbours and questions' answers off, but in the tests that turn them on: the
    # other tests pin what the searches find.
    neighbour_share=0.0,
    neighbour_reach=0,
    answer_share=0.0,
    question_weight=1.0,
)
_EMBEDDERS: list[Embedders] = []


def embedders() -> Embedders:
    """The offline MiniLM model, loaded once per process."""
    if not _EMBEDDERS:
        _EMBEDDERS.append(EmbedderCatalogue(Settings.from_env({}), MiniLMEmbedder()))
    return _EMBEDDERS[0]


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


class BackendContract:
    __test__ = False

    # Each tenant's bound in the backends `make_backend` makes.
    bound: ClassVar[int] = 6
    # How many partitions the tenants are spread over (a sharded backend routes by them).
    partitions: ClassVar[int] = 2

    def make_backend(self, namespace: str) -> ProjectionBackend:
        raise NotImplementedError

    def partition_of(self, tenant: str) -> int:
        return 0

    # -- the fixture and helpers --------------------------------------------------------------

    @pytest.fixture
    def backend(self) -> Iterator[ProjectionBackend]:
        made = self.make_backend(f"contract-{uuid.uuid4().hex[:10]}")
        try:
            yield made
        finally:
            made.drop()

    def apply(self, backend: ProjectionBackend, *events: MemoryEvent) -> list[AppliedOutcome]:
        return asyncio.run(
            aproject(
                backend,
                embedders(),
                events,
                topics=Topics("contract", self.partitions),
                partition_of=self.partition_of,
            )
        )

    def tenant(self) -> str:
        return f"tenant-{uuid.uuid4().hex[:8]}"

    def note(
        self, tenant: str, n: int, text: str, *, thread: str = "t1", importance: float = 0.5
    ) -> MessageRecorded:
        return MessageRecorded(
            tenant, thread, f"note-{n}", text, "user", T0 + timedelta(hours=n), importance, ""
        )

    def turn(self, tenant: str, n: int, query: str, answer: str) -> TurnCompleted:
        return TurnCompleted(
            tenant=tenant,
            thread="t1",
            run="run-1",
            turn=n,
            query=query,
            answer=answer,
            recorded_at=T0 + timedelta(hours=n),
            importance=0.5,
            embedding_model="",
        )

    def forget(
        self,
        tenant: str,
        *,
        memory_ids: tuple[str, ...] = (),
        thread: str | None = None,
        before: datetime | None = None,
        everything: bool = False,
    ) -> MemoryForgotten:
        at = T0 + timedelta(days=1)
        return MemoryForgotten(tenant, uuid.uuid4().hex, at, memory_ids, thread, before, everything)

    def contents(self, backend: ProjectionBackend, tenant: str) -> set[str]:
        return {m.content for m in backend.reader().memories(tenant)}

    def ids(self, backend: ProjectionBackend, tenant: str) -> set[str]:
        return {m.id for m in backend.reader().memories(tenant)}

    # -- applying once ------------------------------------------------------------------------

    def test_an_event_applies_once_and_a_redelivery_gets_the_recorded_outcome(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        event = self.turn(tenant, 1, "My dog is called Rex.", "Nice name.")
        (first,) = self.apply(backend, event)
        assert first.applied_now and len(first.memory_ids) == 2 and first.evicted == ()
        assert self.contents(backend, tenant) == {"My dog is called Rex.", "Nice name."}
        (again,) = self.apply(backend, event)
        assert not again.applied_now
        assert again.memory_ids == first.memory_ids and again.removed == first.removed
        assert len(backend.reader().memories(tenant)) == 2
        assert backend.status().unapplied([event]) == []
        assert backend.status().memory_count(tenant) == 2

    def test_a_memory_carries_its_event_model_and_provenance(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        event = self.note(tenant, 1, "The boiler was serviced in March.")
        self.apply(backend, event)
        (memory,) = backend.reader().memories(tenant)
        assert memory.event_id == event.id and memory.tenant == tenant
        assert memory.embedding_model == embedders().configured_model
        assert memory.provenance is not None and memory.provenance.event_id == event.id
        assert memory.provenance.topic == Topics("contract", 2).memory

    # -- forgetting ---------------------------------------------------------------------------

    def test_forget_by_id_tombstones_it_even_before_it_is_written(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        kept, gone = self.note(tenant, 1, "kept note"), self.note(tenant, 2, "gone note")
        self.apply(backend, kept)
        gone_id = _only_id(gone)
        (outcome,) = self.apply(backend, self.forget(tenant, memory_ids=(gone_id,)))
        assert outcome.removed == ()  # not stored yet, but tombstoned
        (late,) = self.apply(backend, gone)
        assert late.applied_now and late.memory_ids == ()
        assert self.contents(backend, tenant) == {"kept note"}
        forgotten = asyncio.run(_forgotten(backend, {tenant: [gone_id, _only_id(kept)]}))
        assert forgotten == {tenant: {gone_id}}

    def test_forget_by_thread_by_time_and_everything(self, backend: ProjectionBackend) -> None:
        tenant = self.tenant()
        self.apply(
            backend,
            self.note(tenant, 1, "early a", thread="a"),
            self.note(tenant, 2, "early b", thread="b"),
            self.note(tenant, 5, "late a", thread="a"),
            self.note(tenant, 6, "late b", thread="b"),
        )
        (by_thread,) = self.apply(backend, self.forget(tenant, thread="a"))
        assert len(by_thread.removed) == 2
        assert self.contents(backend, tenant) == {"early b", "late b"}
        (by_time,) = self.apply(backend, self.forget(tenant, before=T0 + timedelta(hours=3)))
        assert len(by_time.removed) == 1
        assert self.contents(backend, tenant) == {"late b"}
        (everything,) = self.apply(backend, self.forget(tenant, everything=True))
        assert len(everything.removed) == 1 and self.contents(backend, tenant) == set()
        # Forgotten for good: the same events again write nothing.
        (again,) = self.apply(backend, self.note(tenant, 6, "late b", thread="b"))
        assert not again.applied_now and self.contents(backend, tenant) == set()

    # -- extracted facts ----------------------------------------------------------------------

    def extraction(
        self, turn: TurnCompleted, *facts: str | ExtractedFact, model: str = "tiny"
    ) -> MemoriesExtracted:
        return MemoriesExtracted(
            tenant=turn.tenant, thread=turn.thread, source=turn.id,
            source_memories=memory_ids_of(turn), run=turn.run, turn=turn.turn,
            facts=tuple(f if isinstance(f, ExtractedFact) else ExtractedFact(f) for f in facts),
            strategy="discrete",
            prompt_version="1", model=model, recorded_at=turn.recorded_at,
            extracted_at=T0 + timedelta(days=2), importance=0.5, embedding_model="",
        )  # fmt: skip

    def test_extracted_facts_are_memories_traced_to_their_turn(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        turn = self.turn(tenant, 1, "I'm Sam; I keep bees.", "Lovely.")
        extracted = self.extraction(turn, "Sam keeps bees.")
        self.apply(backend, turn, extracted)
        (fact,) = [m for m in backend.reader().memories(tenant) if m.event_id == extracted.id]
        assert fact.content == "Sam keeps bees." and fact.memory_type is MemoryType.USER_FACT
        assert fact.provenance is not None and fact.provenance.derived == memory_ids_of(turn)
        assert fact.provenance.turn == 1 and fact.timestamp == turn.recorded_at

    def test_forgetting_a_turn_forgets_what_was_extracted_from_it(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        turn = self.turn(tenant, 1, "I'm Sam; I keep bees.", "Lovely.")
        other = self.turn(tenant, 2, "My cat is Tom.", "Hi Tom.")
        self.apply(
            backend, turn, other, self.extraction(turn, "Sam keeps bees."),
            self.extraction(other, "The user's cat is Tom."),
        )  # fmt: skip
        user_said = memory_ids_of(turn)[0]
        (forget,) = self.apply(backend, self.forget(tenant, memory_ids=(user_said,)))
        assert len(forget.removed) == 2  # what the user said, and the fact that came of it
        assert self.contents(backend, tenant) == {
            "Lovely.", "My cat is Tom.", "Hi Tom.", "The user's cat is Tom.",
        }  # fmt: skip
        # Extracted again late (another model, answering after the forget): not written.
        late_one = self.extraction(turn, "Sam has bees on the roof.", model="bigger")
        (late,) = self.apply(backend, late_one)
        assert late.applied_now and late.memory_ids == ()
        assert "Sam has bees on the roof." not in self.contents(backend, tenant)

    def test_a_reextraction_replaces_the_turns_earlier_facts_in_one_step(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        turn = self.turn(tenant, 1, "I'm Sam; I keep bees and two cats.", "Lovely.")
        first = self.extraction(turn, "Sam keeps bees.", "Sam has two cats.", "Sam is Sam.")
        self.apply(backend, turn, first)
        bees, cats, sam = memory_ids_of(first)
        self.apply(backend, self.forget(tenant, memory_ids=(sam,)))  # one of them went already
        again = replace(
            self.extraction(turn, "Sam is a beekeeper.", "Sam has two cats.", model="bigger"),
            replaces=(bees, cats, sam),
        )
        (swapped,) = self.apply(backend, again)
        # What is still held of the earlier facts goes as the new ones come, in one apply.
        assert swapped.applied_now and set(swapped.removed) == {bees, cats}
        assert set(swapped.memory_ids) == set(memory_ids_of(again))
        assert self.contents(backend, tenant) == {
            "I'm Sam; I keep bees and two cats.", "Lovely.", "Sam is a beekeeper.",
            "Sam has two cats.",
        }  # fmt: skip
        (fact,) = [m for m in backend.reader().memories(tenant) if m.content.endswith("keeper.")]
        assert fact.provenance is not None and fact.provenance.replaced == (bees, cats, sam)
        # The earlier extraction delivered again changes nothing: it was applied.
        (late,) = self.apply(backend, first)
        assert not late.applied_now and "Sam keeps bees." not in self.contents(backend, tenant)

    def held_facts(self, backend: ProjectionBackend, tenant: str) -> list[tuple[str, object]]:
        """The tenant's facts as recall ranks them for a question about them, best first,
        each with until when it held."""
        hits = backend.recaller(embedders(), tuning=TUNING).recall(
            tenant, "Which city does the user live in?", k=20
        )
        return [
            (h.memory.content, h.valid_to)
            for h in hits
            if h.memory.memory_type is MemoryType.USER_FACT
        ]

    def test_a_later_fact_about_a_subject_supersedes_the_earlier_whatever_the_order(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        home = "the user's home city"
        # What the turns said is left to the facts, and the turns go first when the bound
        # evicts (the facts stay: only a forget takes what was derived).
        berlin, lyon, paris = (
            replace(self.turn(tenant, n, said, "?"), importance=0.1, echo=True)
            for n, said in ((1, "Guess where I live."), (3, "Guess again."), (5, "And now?"))
        )
        self.apply(
            backend, berlin, lyon, paris,
            self.extraction(berlin, ExtractedFact("The user lives in Berlin.", subject=home)),
            # Case and punctuation aside, it is the same subject.
            self.extraction(
                paris, ExtractedFact("The user lives in Paris.", subject="The User's HOME City!")
            ),
            # An event says what happened; it supersedes nothing and is superseded by nothing.
            self.extraction(berlin, ExtractedFact(
                "The user moved to Berlin.", FactKind.EVENT, T0 + timedelta(hours=2), subject=home,
            ), model="other"),
        )  # fmt: skip
        at = {1: berlin.recorded_at, 3: lyon.recorded_at, 5: paris.recorded_at}
        assert self.held_facts(backend, tenant) == [
            ("The user lives in Paris.", None),  # what holds now ranks first
            ("The user lives in Berlin.", at[5]),
        ]
        # Lyon's fact, extracted last from a turn said between the two, is born superseded by
        # Paris and ends Berlin's: which fact holds follows valid-from, not arrival.
        late = self.extraction(lyon, ExtractedFact("The user lives in Lyon.", subject=home))
        self.apply(backend, late)
        assert dict(self.held_facts(backend, tenant)) == {
            "The user lives in Paris.": None,
            "The user lives in Lyon.": at[5],
            "The user lives in Berlin.": at[3],
        }
        assert self.held_facts(backend, tenant)[0] == ("The user lives in Paris.", None)
        # Forgetting the newest (with the turn it came from) lets the one before hold again.
        self.apply(backend, self.forget(tenant, memory_ids=(memory_ids_of(paris)[0],)))
        assert self.held_facts(backend, tenant) == [
            ("The user lives in Lyon.", None),
            ("The user lives in Berlin.", at[3]),
        ]
        # After an erasure nothing of the tenant's old facts lingers to supersede a new one.
        self.apply(backend, TenantErased(tenant, "r-erase", T0 + timedelta(days=1)))
        again = replace(self.turn(tenant, 0, "Guess where I live.", "?"), echo=True)
        oslo = self.extraction(again, ExtractedFact("The user lives in Oslo.", subject=home))
        self.apply(backend, again, oslo)
        assert self.held_facts(backend, tenant) == [("The user lives in Oslo.", None)]

    # -- consolidation, store items, erasure -----------------------------------------------------

    def consolidation(self, tenant: str, ids: Sequence[str]) -> MemoriesConsolidated:
        return MemoriesConsolidated(
            tenant, tuple(ids), "Summary: two notes about the garden.", MemoryType.KNOWLEDGE,
            "t1", T0 + timedelta(hours=9), 0.7, "",
        )  # fmt: skip

    def test_a_consolidation_replaces_its_group_or_is_skipped_whole(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        one, two, three = (self.note(tenant, n, f"garden note {n}") for n in (1, 2, 3))
        self.apply(backend, one, two, three)
        ids = [_only_id(one), _only_id(two)]
        (done,) = self.apply(backend, self.consolidation(tenant, ids))
        assert done.applied_now and not done.skipped and set(done.removed) == set(ids)
        assert self.contents(backend, tenant) == {
            "garden note 3",
            "Summary: two notes about the garden.",
        }
        (skipped,) = self.apply(backend, self.consolidation(tenant, [ids[0], _only_id(three)]))
        assert skipped.skipped == "members_missing" and skipped.missing == (ids[0],)
        assert skipped.memory_ids == () and skipped.removed == ()
        assert "garden note 3" in self.contents(backend, tenant)

    def item(self, tenant: str, put: str, texts: tuple[str, ...], ttl: float | None) -> ItemStored:
        return ItemStored(
            tenant, ("prefs",), "colour", put, '{"v": 1}', texts, T0, 0.5, "", ttl_minutes=ttl
        )

    def test_a_put_replaces_its_slot_and_an_expiry_ends_only_the_put_that_lapsed(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        first = self.item(tenant, "p1", ("likes green",), 10)
        self.apply(backend, first)
        second = self.item(tenant, "p2", ("likes blue",), 10)
        self.apply(backend, second)
        assert self.contents(backend, tenant) == {"likes blue"}
        stale = ItemExpired(tenant, ("prefs",), "colour", first.id, T0 + timedelta(minutes=10), T0)
        (kept,) = self.apply(backend, stale)
        assert kept.skipped == "item_renewed" and self.contents(backend, tenant) == {"likes blue"}
        # A refresh moves the deadline: the expiry the sweeper saw before it keeps the item.
        later = T0 + timedelta(minutes=30)
        backend.items(embedders()).refresh(tenant, [(second.memory_id, second.id, later)])
        (stored,) = backend.reader().memories_by_id(tenant, [second.memory_id])
        assert stored is not None and stored.expires_at == later
        early = ItemExpired(tenant, ("prefs",), "colour", second.id, T0 + timedelta(minutes=10), T0)
        assert self.apply(backend, early)[0].skipped == "item_renewed"
        lapsed = ItemExpired(tenant, ("prefs",), "colour", second.id, later, T0)
        (ended,) = self.apply(backend, lapsed)
        assert ended.removed == (second.memory_id,) and self.contents(backend, tenant) == set()
        # A forgotten slot is written again by a new put (not by the old one).
        self.apply(backend, self.forget(tenant, memory_ids=(second.memory_id,)))
        self.apply(backend, self.item(tenant, "p3", ("likes red",), None))
        assert self.contents(backend, tenant) == {"likes red"}

    def test_an_erasure_empties_the_tenant_but_an_old_event_still_finds_its_marker(
        self, backend: ProjectionBackend
    ) -> None:
        tenant, other = self.tenant(), self.tenant()
        old = self.note(tenant, 1, "before the erasure")
        self.apply(backend, old, self.note(other, 1, "another tenant's note"))
        self.apply(backend, self.forget(tenant, memory_ids=("some-id",)))
        (erased,) = self.apply(backend, TenantErased(tenant, "r1", T0 + timedelta(days=2)))
        assert erased.removed == (_only_id(old),) and self.contents(backend, tenant) == set()
        assert asyncio.run(_forgotten(backend, {tenant: ["some-id"]})) == {tenant: set()}
        assert not self.apply(backend, old)[0].applied_now
        assert self.contents(backend, tenant) == set()
        assert self.contents(backend, other) == {"another tenant's note"}
        self.apply(backend, self.note(tenant, 3, "after the erasure"))
        assert self.contents(backend, tenant) == {"after the erasure"}

    def test_documents_are_put_removed_by_collection_and_erased_with_the_tenant(
        self, backend: ProjectionBackend
    ) -> None:
        tenant, other = self.tenant(), self.tenant()
        at = T0 + timedelta(days=1)
        view = SummaryViewDefined(tenant, "v1", "long_term", at, group_by=("user_id",),
                                  facets={"user_id": "meta:ams.user_id"})  # fmt: skip
        run = SummaryRunRequested(tenant, "task-1", "v1", at)

        def result(user: str) -> PartitionSummarised:
            return PartitionSummarised(
                tenant, "v1", run.id, {"user_id": user}, f"{user} likes tea", 2, "d", "m", at
            )

        outcomes = self.apply(
            backend, view, run, result("alice"), result("bob|x"),
            SummaryViewDefined(other, "v1", "long_term", at),
        )  # fmt: skip
        assert all(o.applied_now and o.memory_ids == () for o in outcomes)
        reader = backend.reader()
        assert json.loads(reader.documents(tenant, VIEWS)["v1"])["group_by"] == ["user_id"]
        results = reader.documents(tenant, results_of("v1"))
        assert sorted(results) == ["user_id=alice", "user_id=bob%7Cx"]
        assert json.loads(results["user_id=alice"])["summary"] == "alice likes tea"
        assert json.loads(reader.documents(tenant, TASKS)["task-1"])["status"] == "pending"
        assert reader.documents(tenant, "nothing") == {}
        # A view removed takes its results with it; the task and the other tenant's stay.
        self.apply(backend, SummaryViewRemoved(tenant, "v1", at))
        assert reader.documents(tenant, VIEWS) == {}
        assert reader.documents(tenant, results_of("v1")) == {}
        assert list(reader.documents(tenant, TASKS)) == ["task-1"]
        assert list(reader.documents(other, VIEWS)) == ["v1"]
        # A redelivered definition finds its marker: the view stays removed.
        assert not self.apply(backend, view)[0].applied_now
        assert reader.documents(tenant, VIEWS) == {}
        self.apply(backend, TenantErased(tenant, "r1", at))
        assert reader.documents(tenant, TASKS) == {}
        assert list(reader.documents(other, VIEWS)) == ["v1"]

    def test_conditional_documents_apply_whole_or_not_at_all(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        at = T0 + timedelta(days=1)
        root = NamespaceCreated(tenant, "n1", "acme", "SHARED", "n1", at)
        # Two creations racing for one name: the first in the log wins, the second changes
        # nothing (not even its own document), however often either is delivered.
        rival = NamespaceCreated(tenant, "n2", "acme", "SHARED", "n2", at)
        first, second = self.apply(backend, root, rival)
        assert first.applied_now and not first.skipped
        assert second.applied_now and second.skipped == "conflict"
        reader = backend.reader()
        held = reader.documents(tenant, NAMESPACES)
        assert list(held) == ["n1"]
        # An update names the revision it replaces: a second one from the same revision is
        # the same event (applied once); one from a stale revision changes nothing.
        renamed = NamespaceUpdated(tenant, "n1", held["n1"], "acme-corp", "ACTIVE", at)
        (done,) = self.apply(backend, renamed)
        now = reader.documents(tenant, NAMESPACES)["n1"]
        assert not done.skipped and json.loads(now)["name"] == "acme-corp"
        assert list(reader.documents(tenant, NAMESPACE_NAMES).values()) == ["n1"]
        stale = NamespaceRemoved(tenant, "n1", held["n1"], at)
        (refused,) = self.apply(backend, stale)
        assert refused.skipped == "conflict"
        assert reader.documents(tenant, NAMESPACES) == {"n1": now}
        # The old name is free: a root may take it.
        reused = NamespaceCreated(tenant, "n3", "acme", "SHARED", "n3", at)
        (again,) = self.apply(backend, reused)
        assert not again.skipped and sorted(reader.documents(tenant, NAMESPACES)) == ["n1", "n3"]

    def test_the_bound_evicts_the_least_important_then_the_oldest(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        notes = [self.note(tenant, n, f"note {n}", importance=0.5) for n in range(self.bound)]
        precious = self.note(tenant, 0, "precious", importance=0.9)
        self.apply(backend, precious, *notes[1:])
        assert len(backend.reader().memories(tenant)) == self.bound
        (pushed,) = self.apply(backend, self.note(tenant, 50, "newest", importance=0.1))
        # The newest is the least important: it goes at once.
        assert pushed.memory_ids == pushed.evicted
        (over,) = self.apply(backend, self.note(tenant, 51, "newer", importance=0.5))
        assert over.evicted == (_only_id(notes[1]),)
        assert "precious" in self.contents(backend, tenant)
        assert backend.status().memory_count(tenant) == self.bound

    # -- positions and generations ----------------------------------------------------------

    def test_positions_move_with_events_and_advance_only_forward(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        self.apply(backend, self.note(tenant, 1, "one"), self.note(tenant, 2, "two"))
        field = f"{Topics('contract', 2).memory}/{self.partition_of(tenant)}"
        assert backend.status().positions()[field] == 1

        async def advance() -> dict[str, int]:
            shard = backend.shard_of(tenant)
            async with backend.session(shard) as session:
                await session.writer.advance({field: 5}, held={field: 1})
                await session.writer.advance({field: 3})  # never back
                await session.writer.advance({field: 9}, held={field: 7})  # 7 is not held
                return await session.writer.positions()

        assert (asyncio.run(advance()))[field] == 5
        assert backend.status().positions()[field] == 5

    def test_a_batch_after_a_gap_in_the_positions_is_refused_whole(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        self.apply(backend, self.note(tenant, 1, "one"), self.note(tenant, 2, "two"))
        field = f"{Topics('contract', 2).memory}/{self.partition_of(tenant)}"
        topic, partition = Topics("contract", 2).memory, self.partition_of(tenant)
        # More events than one call of the Redis script takes: every call must refuse.
        batch = [
            replace(
                _embedded(self.note(tenant, n, f"after the gap {n}")),
                position=Position(topic, partition, n + 2),
            )
            for n in range(3, 9)
        ]

        async def apply(follows: dict[str, int]) -> list[AppliedOutcome]:
            async with backend.session(backend.shard_of(tenant)) as session:
                return await session.writer.apply(batch, follows=follows)

        # The batch begins at offset 5: it follows offset 4, and Redis holds up to 1.
        with pytest.raises(PositionsBehind):
            asyncio.run(apply({field: 4}))
        assert self.contents(backend, tenant) == {"one", "two"}
        assert backend.status().positions()[field] == 1

        outcomes = asyncio.run(apply({field: 1}))  # the gap read again: it follows on
        assert [o.applied_now for o in outcomes] == [True] * len(batch)
        assert {f"after the gap {n}" for n in range(3, 9)} <= self.contents(backend, tenant)
        assert backend.status().positions()[field] == 10

    def test_a_rebuild_writes_a_new_generation_and_swaps_in(
        self, backend: ProjectionBackend
    ) -> None:
        tenant, other = self.tenant(), self.tenant()
        self.apply(backend, self.note(tenant, 1, "live note"), self.note(other, 1, "other note"))
        shard = backend.shard_of(tenant)
        model, dims = embedders().configured_model, embedders().configured().dims

        async def rebuild() -> tuple[int, int, list[str], SwapResult, SwapResult]:
            async with backend.session(shard) as session:
                live = await session.generations.live()
                rebuilt = await session.generations.allocate()
                assert rebuilt != live and await session.generations.allocate() != rebuilt
                await session.writer.ensure_index(model, dims, rebuilt)
                assert await session.generations.model(rebuilt) == model
                memories = backend.reader().memories(tenant)
                vectors = await session.writer.known_vectors(memories)
                assert all(v is not None for v in vectors)
                home = f"{Topics('contract', 2).memory}/{self.partition_of(tenant)}"
                behind = await session.generations.swap_tenant(live, rebuilt, tenant, home)
                outcomes = await session.writer.apply(
                    [
                        _embedded(self.note(tenant, 2, "rebuilt note")),
                        _embedded(SummaryViewDefined(tenant, "v1", "long_term", T0)),
                    ],
                    into=rebuilt,
                )
                positions = await session.writer.positions()
                await session.writer.advance(positions, into=rebuilt)
                differences = await session.comparer.compare(live, rebuilt, tenant)
                # The live generation moves on elsewhere: the whole rebuild is behind, the
                # tenant's is not (its state depends on its own partition alone).
                elsewhere = f"{Topics('contract', 2).memory}/{self.partition_of(tenant) + 1}"
                await session.writer.advance({elsewhere: 99})
                whole = await session.generations.swap_all(live, rebuilt)
                swapped = await session.generations.swap_tenant(live, rebuilt, tenant, home)
                assert outcomes[0].applied_now
                return live, rebuilt, [str(d) for d in differences], behind, whole, swapped

        live, rebuilt, differences, behind, whole, swapped = asyncio.run(rebuild())
        assert behind is SwapResult.BEHIND and whole is SwapResult.BEHIND
        assert swapped is SwapResult.SWAPPED
        assert any("only in the live projection" in d for d in differences)
        # The tenant's live memories are its rebuilt ones; the other tenant's stay.
        assert self.contents(backend, tenant) == {"rebuilt note"}
        assert list(backend.reader().documents(tenant, VIEWS)) == ["v1"]  # documents go along
        assert self.contents(backend, other) == {"other note"}

        async def swap_all() -> tuple[SwapResult, SwapResult, int]:
            async with backend.session(shard) as session:
                fresh = await session.generations.allocate()
                await session.writer.ensure_index(model, dims, fresh)
                await session.writer.advance(await session.writer.positions(), into=fresh)
                done = await session.generations.swap_all(live, fresh)
                stale = await session.generations.swap_all(live, fresh)
                await session.generations.drop(rebuilt)
                return done, stale, await session.generations.live()

        done, stale, now = asyncio.run(swap_all())
        assert (done, stale) == (SwapResult.SWAPPED, SwapResult.STALE) and now != live
        assert self.contents(backend, tenant) == set()  # the fresh generation holds nothing

    # -- reading ------------------------------------------------------------------------------

    def test_the_reader_filters_and_looks_up_by_id_oldest_first(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        a, b = self.note(tenant, 3, "third", thread="a"), self.note(tenant, 1, "first", thread="b")
        self.apply(backend, a, b)
        reader = backend.reader()
        assert [m.content for m in reader.memories(tenant)] == ["first", "third"]
        assert [m.content for m in reader.memories(tenant, MemoryFilter(thread="a"))] == ["third"]
        early = reader.memories(tenant, MemoryFilter(before=T0 + timedelta(hours=2)))
        assert [m.content for m in early] == ["first"]
        found = reader.memories_by_id(tenant, [_only_id(a), "nothing", _only_id(b)])
        assert [m.content if m else None for m in found] == ["third", None, "first"]
        assert reader.memories(self.tenant()) == []

    def test_recall_finds_by_words_and_by_meaning_within_k_and_the_tenant(
        self, backend: ProjectionBackend
    ) -> None:
        tenant, other = self.tenant(), self.tenant()
        self.apply(
            backend,
            self.note(tenant, 1, "I play the cello every Sunday."),
            self.note(tenant, 2, "My flat is in Lisbon near the river."),
            self.note(tenant, 3, "Project Zanzibar ships on 8 May."),
            self.note(other, 1, "My flat is in Lisbon too, a secret."),
        )
        recaller = backend.recaller(embedders(), tuning=TUNING)
        words = recaller.recall(tenant, "Zanzibar", k=3)
        assert words[0].memory.content == "Project Zanzibar ships on 8 May."
        meaning = recaller.recall(tenant, "which city do I live in?", k=3)
        assert meaning[0].memory.content == "My flat is in Lisbon near the river."
        assert [h.score for h in meaning] == sorted((h.score for h in meaning), reverse=True)
        assert len(recaller.recall(tenant, "music", k=2)) == 2
        everything = recaller.recall(tenant, "Lisbon secret flat", k=10)
        assert {h.memory.tenant for h in everything} == {tenant}
        hostile = '*) | @tenant_tag:{x} -@content:"secret" => [KNN 10 @embedding $v] \\ %'
        assert {h.memory.tenant for h in recaller.recall(tenant, hostile, k=10)} <= {tenant}
        assert recaller.recall(self.tenant(), "Lisbon", k=5) == []
        with pytest.raises(InvalidInputError):
            recaller.recall(tenant, "Lisbon", k=0)

    def test_a_top_hit_lifts_what_was_said_next_to_it_in_its_thread(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        question = "Did you ever make it to the Zanzibar festival?"
        answer = "Yes, my sister and I went last spring."  # no word of the question
        self.apply(
            backend,
            self.note(tenant, 1, question),
            self.note(tenant, 2, answer),
            self.note(tenant, 3, "I bought new running shoes on Tuesday."),
            self.note(tenant, 4, "Our cat knocked the vase over again."),
            self.note(tenant, 5, "Yes, we went to the festival too.", thread="t2"),
        )
        lent = replace(TUNING, neighbour_share=0.8, neighbour_reach=1)
        on = backend.recaller(embedders(), tuning=lent).recall(tenant, "Zanzibar festival", k=5)
        assert [h.memory.content for h in on[:2]] == [question, answer]
        # The answer ranks with what the hit lends it (its own score is lower).
        assert on[1].score == pytest.approx(0.8 * on[0].score + 0.2 * self._own(backend, tenant))
        off = backend.recaller(embedders(), tuning=TUNING).recall(tenant, "Zanzibar festival", k=5)
        by_content = {h.memory.content: h.score for h in off}
        assert by_content.get(answer, 0.0) < on[1].score
        # A neighbour is read with the search's filters: one the filter leaves out never comes.
        search = backend.search(embedders(), tuning=lent)
        before_answer = SearchFilter(tenant, until=T0 + timedelta(hours=1, minutes=30))
        page = search.search(before_answer, "Zanzibar festival", limit=5)
        assert [h.memory.content for h in page.hits] == [question]

    def test_a_top_hit_that_asks_hands_its_place_to_its_answer(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        question = "Did you ever make it to the Zanzibar festival?"
        answer = "Yes, my sister and I went last spring."
        self.apply(
            backend,
            self.note(tenant, 1, "I bought new running shoes on Tuesday."),
            self.note(tenant, 2, question),
            self.note(tenant, 3, answer),
            self.note(tenant, 4, "Our cat knocked the vase over again."),
        )
        asked = replace(TUNING, neighbour_reach=1, answer_share=1.0, question_weight=0.9)
        on = backend.recaller(embedders(), tuning=asked).recall(tenant, "Zanzibar festival", k=5)
        assert [h.memory.content for h in on[:2]] == [answer, question]
        assert on[1].score == pytest.approx(0.9 * on[0].score)
        # The neighbour share is off: the turn before the question borrows nothing.
        off = backend.recaller(embedders(), tuning=TUNING).recall(tenant, "Zanzibar festival", k=5)
        assert off[0].memory.content == question and off[0].score == pytest.approx(on[0].score)
        shoes = "I bought new running shoes on Tuesday."
        assert {h.memory.content: h.score for h in on}.get(shoes) == {
            h.memory.content: h.score for h in off
        }.get(shoes)

    def _own(self, backend: ProjectionBackend, tenant: str) -> float:
        """The answer's own score for the question, as recall ranks it without neighbours."""
        ranked = backend.recaller(embedders(), tuning=TUNING).recall(tenant, "Zanzibar festival", 5)
        answer = "Yes, my sister and I went last spring."
        return next((h.score for h in ranked if h.memory.content == answer), 0.0)

    def test_search_filters_pages_and_counts(self, backend: ProjectionBackend) -> None:
        tenant = self.tenant()
        self.apply(
            backend,
            self.note(tenant, 1, "the red kite nests in the oak", thread="birds"),
            self.note(tenant, 2, "the barn owl hunts at dusk", thread="birds"),
            self.note(tenant, 3, "the oak was planted in 1990", thread="trees"),
        )
        search = backend.search(embedders(), tuning=TUNING)
        birds = SearchFilter(tenant, threads=("birds",))
        hybrid = search.search(birds, "oak tree")
        assert hybrid.total == 2 and hybrid.hits[0].memory.content.startswith("the red kite")
        keyword = search.search(SearchFilter(tenant), "oak", mode=SearchMode.KEYWORD)
        assert keyword.total == 2
        assert {h.memory.thread for h in keyword.hits} == {"birds", "trees"}
        semantic = search.search(
            SearchFilter(tenant, not_threads=("birds",)), "trees", mode=SearchMode.SEMANTIC
        )
        assert [h.memory.thread for h in semantic.hits] == ["trees"] and semantic.total == 1
        listing = search.search(SearchFilter(tenant), "", limit=2, offset=1)
        assert listing.total == 3
        assert [h.memory.content for h in listing.hits] == [
            "the barn owl hunts at dusk",
            "the red kite nests in the oak",
        ]
        until = search.search(SearchFilter(tenant, until=T0 + timedelta(hours=1)), "")
        assert [h.memory.content for h in until.hits] == ["the red kite nests in the oak"]
        typed = SearchFilter(tenant, memory_types=(MemoryType.KNOWLEDGE,))
        assert search.search(typed, "oak").total == 0
        kept = search.search(SearchFilter(tenant), "oak", keep=lambda m: m.thread == "trees")
        assert [h.memory.thread for h in kept.hits] == ["trees"] and kept.total == 1
        with pytest.raises(InvalidInputError):
            search.search(SearchFilter(tenant), "oak", max_distance=0.5)

    def test_items_score_each_field_apart(self, backend: ProjectionBackend) -> None:
        tenant = self.tenant()
        item = self.item(tenant, "p1", ("The capital of France", "a recipe for bread"), None)
        bare = ItemStored(tenant, ("prefs",), "bare", "p2", "{}", (), T0, 0.5, "")
        self.apply(backend, item, bare)
        scores = backend.items(embedders()).similarities(
            tenant, [item.memory_id, bare.memory_id, "absent"], "how to bake bread"
        )
        assert set(scores) == {item.memory_id}
        alone = embedders().configured()
        bread = alone.embed_documents(["a recipe for bread"])[0]
        query = alone.embed_query("how to bake bread")
        assert scores[item.memory_id] == pytest.approx(float(bread @ query), abs=1e-3)

    def test_status_counts_tenants_and_waits_for_what_is_applied(
        self, backend: ProjectionBackend
    ) -> None:
        tenant = self.tenant()
        first, last = self.note(tenant, 1, "one"), self.note(tenant, 4, "two")
        self.apply(backend, first, last)
        status = backend.status()
        (stats,) = status.tenant_stats(tenant)
        assert (stats.memories, stats.oldest, stats.newest) == (
            2,
            first.recorded_at,
            last.recorded_at,
        )
        assert tenant in {s.tenant for s in status.tenant_stats()}
        assert status.wait_applied([first, last], timeout_s=5) == []
        pending = self.note(tenant, 5, "not applied")
        assert status.wait_applied([pending], timeout_s=0.1) == [pending]
        assert status.unapplied([first, pending]) == [pending]
        (report,) = [r for r in backend.shard_reports() if r.shard == backend.shard_of(tenant)]
        assert report.reachable and report.memories >= 2

    # -- what a deployment keeps beside the projection ---------------------------------------

    def test_api_keys(self, backend: ProjectionBackend) -> None:
        keys = backend.api_keys()
        keys.put("d1", '{"tenant": "a"}')
        keys.put("d2", '{"tenant": "b"}')
        assert keys.get("d1") == '{"tenant": "a"}' and keys.get("none") is None
        assert keys.count() == 2 and set(keys.records()) == {"d1", "d2"}
        assert keys.delete("d1") and not keys.delete("d1") and keys.count() == 1

    def test_working_memory_compares_and_sets_and_lapses(self, backend: ProjectionBackend) -> None:
        tenant = self.tenant()

        async def run() -> None:
            store = backend.working_memory()
            try:
                assert await store.get(tenant, "s1") is None
                v1 = await store.put(tenant, "s1", "{}", expected_version=0, ttl_s=None, owner="u1")
                assert v1 == 1
                with pytest.raises(StaleSessionError) as stale:
                    await store.put(tenant, "s1", "{}", expected_version=0, ttl_s=None, owner="u1")
                assert stale.value.current == 1
                await store.put(tenant, "s1", "[1]", expected_version=1, ttl_s=None, owner="u1")
                await store.put(tenant, "s2", "{}", expected_version=0, ttl_s=None, owner="u2")
                await store.put(tenant, "s3", "{}", expected_version=0, ttl_s=1, owner="u1")
                got = await store.get(tenant, "s1")
                assert got is not None and (got.document, got.version) == ("[1]", 2)
                assert await store.sessions(tenant, owner="u1", offset=0, limit=10) == (
                    2,
                    ["s1", "s3"],
                )
                assert await store.sessions(tenant, owner=None, offset=1, limit=1) == (3, ["s2"])
                assert await store.sessions(self.tenant(), owner=None, offset=0, limit=9) == (0, [])
                assert await store.delete(tenant, "s2") and not await store.delete(tenant, "s2")
                deadline = time.monotonic() + 15
                while await store.get(tenant, "s3") is not None:  # a TTL of a second
                    assert time.monotonic() < deadline, "the session's TTL did not lapse"
                    await asyncio.sleep(0.05)
                assert await store.sessions(tenant, owner=None, offset=0, limit=9) == (1, ["s1"])
                assert (
                    await store.put(tenant, "s3", "{}", expected_version=0, ttl_s=None, owner=None)
                    == 1
                )
            finally:
                await store.aclose()

        asyncio.run(run())

    def test_the_token_ledger_adds_up_per_day_tenant_and_purpose(
        self, backend: ProjectionBackend
    ) -> None:
        ledger = backend.token_ledger()
        day = date(2026, 12, 5)
        one, other = self.tenant(), self.tenant()
        ledger.spend(day, one, "extraction:discrete", 300)
        ledger.spend(day, one, "extraction:discrete", 45)
        ledger.spend(day, one, "consolidation", 7)
        ledger.spend(day, other, "extraction:discrete", 1)
        ledger.spend(day - timedelta(days=1), one, "extraction:discrete", 1000)
        assert ledger.spent(day, one) == {
            (one, "extraction:discrete"): 345,
            (one, "consolidation"): 7,
        }
        assert ledger.spent(day)[(other, "extraction:discrete")] == 1
        assert ledger.spent(day + timedelta(days=1), one) == {}

    def test_processes_report_until_their_ttl(self, backend: ProjectionBackend) -> None:
        registry = backend.processes()
        seen = datetime.now(UTC).replace(microsecond=0)
        worker = ProcessReport("worker", 11, "h1", seen, 9100, 0, "", None)
        server = ProcessReport("server", 12, "h1", seen, None, None, "boom", seen)
        registry.write(worker, ttl_s=60)
        registry.write(server, ttl_s=1)
        assert [r.kind for r in registry.reports()] == ["server", "worker"]
        assert registry.reports()[0].last_error == "boom"
        wait_until(lambda: [r.kind for r in registry.reports()] == ["worker"], "the TTL")
        registry.remove("h1", 11)
        assert registry.reports() == []

    def test_a_processs_lags_are_kept_for_an_hour_after_its_last_report(
        self, backend: ProjectionBackend
    ) -> None:
        registry = backend.processes()
        host = f"h-{uuid.uuid4().hex[:6]}"
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)

        def beat(minutes: int, lag: int | None, kind: str = "worker") -> None:
            at = start + timedelta(minutes=minutes)
            registry.write(ProcessReport(kind, 7, host, at, None, lag, "", None), ttl_s=60)

        beat(0, 40)
        beat(40, 12)
        beat(45, None)  # no lag known: a heartbeat, no point
        beat(95, 3)
        beat(100, 0, kind="server")  # another process's series
        mine = [s for s in registry.lags() if s.host == host]
        assert [(s.kind, s.pid) for s in mine] == [("server", 7), ("worker", 7)]
        # The point of minute 0 is more than an hour before the last: gone.
        assert mine[1].points == (
            (start + timedelta(minutes=40), 12),
            (start + timedelta(minutes=95), 3),
        )
        registry.remove(host, 7)

    def test_the_journal_records_runs_and_effects(self, backend: ProjectionBackend) -> None:
        journal = backend.journal()
        snapshot = ThreadSnapshot("thread-1", (), {}, Usage(), 0)
        run = RunRecord("run-1", "thread-1", "acme", "hello", snapshot)
        journal.begin_run(run)
        assert journal.run("run-1") == run
        calls: list[int] = []
        for _ in range(2):
            assert run_effect(journal, "run-1", "send", "k1", lambda: calls.append(1) or 7) == 7
        assert calls == [1]
        journal.end_run("run-1", "completed")
        ended = journal.run("run-1")
        assert ended is not None and ended.status == "completed"

    def test_a_drop_forgets_everything_of_the_namespace(self, backend: ProjectionBackend) -> None:
        tenant = self.tenant()
        self.apply(backend, self.note(tenant, 1, "to be dropped"))
        backend.api_keys().put("d", "r")
        backend.drop()
        assert backend.reader().memories(tenant) == [] and backend.api_keys().count() == 0
        assert backend.status().tenant_stats() == []

    def test_chores_and_the_layout_say_what_the_backend_has(
        self, backend: ProjectionBackend
    ) -> None:
        layout = backend.current_layout()
        assert layout.count >= 1 and backend.shard_of(self.tenant()) in range(layout.count)
        assert all(
            backend.owns(s)(p) == (layout.of_partition(p) == s)
            for s in range(layout.count)
            for p in range(4)
        )
        backend.check_model(embedders())
        with pytest.raises(ConfigurationError):
            embedders().for_model("no-such-model")


def _only_id(event: MemoryEvent) -> str:
    (memory_id,) = memory_ids_of(event)
    return memory_id


def _embedded(event: MemoryEvent) -> Embedded:
    """`event` ready to apply into a generation of the configured model, as a rebuild has it."""
    model = embedders().configured()
    memories = tuple(replace(m, embedding_model=model.model_id) for m in memories_of(event))
    return Embedded(event, memories, model.embed_documents([m.content for m in memories]))


async def _forgotten(
    backend: ProjectionBackend, asked: dict[str, list[str]]
) -> dict[str, set[str] | Exception]:
    reader = backend.tombstones()
    try:
        return await reader.forgotten(asked)
    finally:
        await reader.aclose()
