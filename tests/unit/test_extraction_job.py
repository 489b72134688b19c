"""The extraction job's decisions, one message at a time, against stand-ins of the projection
and the model: which turns it asks about, which it skips without asking, what becomes a dead
letter, what it waits out; and which offsets it may commit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import CommitFailedError

from memstream.agent import ScriptedModel
from memstream.errors import (
    ConfigurationError,
    ExtractionOutputError,
    MemstreamError,
    ModelProviderError,
    ModelRefusedError,
)
from memstream.inmemory.state import Namespace
from memstream.inmemory.stores import InMemoryTokenLedger
from memstream.llm import ModelRequest
from memstream.memory.codec import encode_event
from memstream.memory.events import MemoriesExtracted, TurnCompleted, extraction_id, memories_of
from memstream.memory.extraction import PROMPT_VERSION, Extracting, extraction_tenants
from memstream.memory.model import LONG_TERM_STRATEGY, Memory
from memstream.memory.monitoring import ModelUsage, MonitoringEvent, Skipped
from memstream.memory.ports import Marked
from memstream.memory.tenancy import validate_tenant
from memstream.streams import extraction as job_module
from memstream.streams import follower as follower_module
from memstream.streams.extraction import ExtractionJob, ExtractionOutlets, ExtractionParts
from memstream.streams.follower import LogFollower, Offsets
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import RawMessage

AT = datetime(2023, 5, 8, 14, 0, tzinfo=UTC)
TURN = TurnCompleted(
    "acme", "support", "run-1", 0, "I'm Sam and I keep bees.", "Lovely!", AT, 0.5, "model@1"
)
ANSWER = json.dumps({"memories": [{"text": "Sam keeps bees.", "kind": "fact"}]})
DONE = extraction_id("acme", TURN.id, "discrete", PROMPT_VERSION, "tiny")


class Projection:
    """The applied markers and held memories a job asks about; `late` polls see the turn
    unapplied first (the job read it ahead of the worker)."""

    def __init__(self, applied: set[str], held: Sequence[Memory] = (), late: int = 0) -> None:
        self.applied = applied
        self.held = {m.id: m for m in held}
        self.late = late

    def unapplied(self, events: Sequence[Marked]) -> list[Marked]:
        if self.late:
            self.late -= 1
            return list(events)
        return [e for e in events if e.id not in self.applied]

    def memories_by_id(self, tenant: str, ids: Sequence[str]) -> list[Memory | None]:
        return [self.held.get(i) for i in ids]


class Monitor:
    def __init__(self) -> None:
        self.events: list[MonitoringEvent] = []

    def announce(self, event: MonitoringEvent) -> None:
        self.events.append(event)


def job(
    model: ScriptedModel,
    projection: Projection,
    tenants: tuple[str, ...] = ("*",),
    *,
    ledger: InMemoryTokenLedger | None = None,
    daily_tokens: int = 0,
) -> tuple[ExtractionJob, list[MemoriesExtracted], list[MemstreamError], Monitor]:
    sent: list[MemoriesExtracted] = []
    letters: list[MemstreamError] = []
    monitor = Monitor()

    async def send(event: MemoriesExtracted) -> None:
        sent.append(event)

    async def dead_letter(message: RawMessage, error: MemstreamError) -> None:
        letters.append(error)

    parts = ExtractionParts(
        model,
        "tiny",
        extraction_tenants(tenants, Extracting()),
        projection,  # type: ignore[arg-type]
        projection,  # type: ignore[arg-type]
        ledger or InMemoryTokenLedger(Namespace()),
        daily_tokens=daily_tokens,
    )
    outlets = ExtractionOutlets(send, dead_letter, monitor, None, "model@1", 0.5, 500)
    kafka = KafkaConnection("127.0.0.1:1")
    return ExtractionJob(kafka, "ns.memory", "ns.extract", parts, outlets), sent, letters, monitor


def message(event: Any = TURN, key: bytes = b"acme") -> RawMessage:
    return RawMessage("ns.memory", 0, 7, key, encode_event(event), AT)


def held_turn() -> Projection:
    return Projection({TURN.id}, memories_of(TURN))


def raising(error: Exception) -> Callable[[ModelRequest], str]:
    def reply(request: ModelRequest) -> str:
        raise error

    return reply


def test_a_recorded_turn_is_asked_about_once_and_its_usage_announced() -> None:
    model = ScriptedModel([ANSWER])
    extraction, sent, letters, monitor = job(model, held_turn())
    written = asyncio.run(extraction.handle(message()))
    assert written is not None and sent == [written] and not letters
    assert written.id == DONE and [f.text for f in written.facts] == ["Sam keeps bees."]
    (usage,) = monitor.events
    assert isinstance(usage, ModelUsage) and usage.purpose == "extraction:discrete"
    assert (usage.tenant, usage.thread, usage.calls) == ("acme", "support", 1)
    assert usage.input_tokens == written.input_tokens > 0


def test_a_turn_extracted_already_is_not_asked_about_again() -> None:
    model = ScriptedModel([])  # any call fails the test: the script is empty
    projection = held_turn()
    projection.applied.add(DONE)
    extraction, sent, letters, _ = job(model, projection)
    assert asyncio.run(extraction.handle(message())) is None
    assert not model.requests and not sent and not letters


@pytest.mark.parametrize(
    ("projection", "key"),
    [
        (Projection({TURN.id}), b"acme"),  # its memories are gone: forgotten, evicted, erased
        (held_turn(), b"globex"),  # another tenant's turn (a key that is not its tenant)
    ],
)
def test_nothing_is_asked_about_a_turn_with_nothing_left_or_of_another_tenant(
    projection: Projection, key: bytes
) -> None:
    model = ScriptedModel([])
    extraction, sent, _, _ = job(model, projection, ("acme",))
    assert asyncio.run(extraction.handle(message(key=key))) is None
    assert not model.requests and not sent


def test_events_that_record_nothing_to_extract_are_passed_over() -> None:
    model = ScriptedModel([ANSWER])
    extraction, *_ = job(model, held_turn())
    fact = asyncio.run(extraction.handle(message()))
    assert fact is not None
    again, *_ = job(ScriptedModel([]), held_turn())
    assert asyncio.run(again.handle(message(fact))) is None  # a fact is never extracted again
    assert asyncio.run(again.handle(RawMessage("ns.memory", 0, 8, b"acme", b"{not json"))) is None


def test_a_turn_read_ahead_of_the_projection_waits_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follower_module, "_APPLIED_POLL_S", 0.001)
    projection = held_turn()
    projection.late = 3
    model = ScriptedModel([ANSWER])
    extraction, sent, _, _ = job(model, projection)
    assert asyncio.run(extraction.handle(message())) is not None
    assert projection.late == 0 and len(sent) == 1


@pytest.mark.parametrize(
    ("replies", "code"),
    [
        (["not json", "still not json"], "extraction_output"),
        ([raising(ModelRefusedError("400: content refused"))], "model_refused"),
    ],
)
def test_a_turn_the_model_cannot_or_will_not_answer_is_a_dead_letter(
    replies: list[Any], code: str
) -> None:
    extraction, sent, letters, _ = job(ScriptedModel(replies), held_turn())
    assert asyncio.run(extraction.handle(message())) is None
    (letter,) = letters
    assert letter.code == code and not sent
    assert isinstance(letter, ExtractionOutputError | ModelRefusedError)


def test_an_outage_of_the_model_is_waited_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_module, "_RETRY_FIRST_S", 0.001)
    outage = raising(ModelProviderError("503 (after 5 tries)"))
    model = ScriptedModel([outage, outage, ANSWER])
    extraction, sent, letters, _ = job(model, held_turn())
    assert asyncio.run(extraction.handle(message())) is not None
    assert len(model.requests) == 3 and len(sent) == 1 and not letters


def test_a_tenant_over_its_daily_tokens_is_not_extracted_until_the_next_day() -> None:
    ledger = InMemoryTokenLedger(Namespace())
    extraction, sent, _, _ = job(ScriptedModel([ANSWER]), held_turn(), ledger=ledger)
    first = asyncio.run(extraction.handle(message()))
    assert first is not None
    today = first.extracted_at.date()
    spent = first.input_tokens + first.output_tokens
    assert ledger.spent(today, TURN.tenant) == {("acme", "extraction:discrete"): spent}
    later = TurnCompleted("acme", "support", "run-1", 1, "I also keep hens.", "Nice.", AT, 0.5, "m")
    model = ScriptedModel([])  # over budget: never asked
    held = Projection({later.id}, memories_of(later))
    over, sent, _, monitor = job(model, held, ledger=ledger, daily_tokens=spent)
    assert asyncio.run(over.handle(message(later))) is None and not sent and not model.requests
    (skipped,) = monitor.events
    assert isinstance(skipped, Skipped)
    assert (skipped.stage, skipped.code, skipped.tenant) == ("extract", "budget_exhausted", "acme")
    assert "MEMSTREAM_EXTRACTION_DAILY_TOKENS" in skipped.reason
    # What another tenant spent, or the tenant spent on another day, is not counted.
    ledger.spend(today - timedelta(days=1), validate_tenant("acme"), "extraction:discrete", 10**9)
    ledger.spend(today, validate_tenant("globex"), "extraction:discrete", 10**9)
    roomy, sent, _, _ = job(ScriptedModel([ANSWER]), held, ledger=ledger, daily_tokens=spent + 1)
    assert asyncio.run(roomy.handle(message(later))) is not None and len(sent) == 1


def test_a_tenant_may_have_its_own_strategy_and_the_star_stands_for_the_others() -> None:
    model = ScriptedModel([ANSWER, ANSWER])
    extraction, sent, _, monitor = job(model, held_turn(), ("acme=preferences", "*"))
    asyncio.run(extraction.handle(message()))
    (event,) = sent
    assert event.strategy == "preferences" and "only the user's preferences" in (
        model.requests[0].system
    )
    usage = monitor.events[0]
    assert isinstance(usage, ModelUsage) and usage.purpose == "extraction:preferences"
    globex = TurnCompleted("globex", "t", "r", 0, "I'm Ann.", "Hi!", AT, 0.5, "m")
    others, sent, _, _ = job(ScriptedModel([ANSWER]), Projection({globex.id}, memories_of(globex)),
                             ("acme=preferences", "*"))  # fmt: skip
    assert asyncio.run(others.handle(message(globex, b"globex"))) is not None
    assert sent[0].strategy == "discrete"
    with pytest.raises(ConfigurationError, match="MEMSTREAM_EXTRACTION_TENANTS"):
        extraction_tenants(["acme=everything"], Extracting())
    with pytest.raises(ConfigurationError, match="custom"):
        extraction_tenants(["acme=custom"], Extracting())  # no prompt to go with it


def test_a_working_memory_session_extracts_as_it_asks_within_its_tenants_choice() -> None:
    asked = replace(TURN, metadata={LONG_TERM_STRATEGY: "summary"})
    model = ScriptedModel([ANSWER])
    extraction, sent, _, _ = job(model, held_turn())
    asyncio.run(extraction.handle(message(asked)))
    assert sent[0].strategy == "summary" and "summarises the turn" in model.requests[0].system
    # A tenant extraction leaves alone stays alone, whatever its sessions ask.
    model = ScriptedModel([])
    alone, sent, _, _ = job(model, held_turn(), ("globex",))
    assert asyncio.run(alone.handle(message(asked))) is None and not model.requests
    # A custom strategy without its prompt cannot run: the tenant's strategy does.
    custom = replace(TURN, metadata={LONG_TERM_STRATEGY: "custom"})
    extraction, sent, _, _ = job(ScriptedModel([ANSWER]), held_turn())
    asyncio.run(extraction.handle(message(custom)))
    assert sent[0].strategy == "discrete"


def test_offsets_commit_up_to_the_first_unfinished_message() -> None:
    offsets = Offsets()
    p0, p1 = TopicPartition("t", 0), TopicPartition("t", 1)
    for offset in (10, 11, 12):
        offsets.read(p0, offset)
    offsets.read(p1, 4)
    assert offsets.committable() == {p0: 10, p1: 4} and offsets.in_flight == 4
    offsets.committed({p0: 10, p1: 4})
    offsets.done(p0, 11)
    offsets.done(p1, 4)
    assert offsets.committable() == {p1: 5}  # p0 still waits on 10
    assert offsets.committable() == {p1: 5}  # not committed yet: still to commit
    offsets.committed({p1: 5})
    offsets.done(p0, 10)
    assert offsets.committable() == {p0: 12}
    offsets.committed({p0: 12})
    assert offsets.committable() == {}  # nothing moved since
    offsets.done(p0, 12)
    offsets.keep_only([p0])  # p1 was taken away
    assert offsets.committable() == {p0: 13} and offsets.in_flight == 0


class Consumer:
    """What the job asks of its consumer when it commits: its assignment, and commits."""

    def __init__(self, held: set[TopicPartition], fail: int = 0) -> None:
        self.held = held
        self.commits: list[dict[TopicPartition, int]] = []
        self.fail = fail

    def assignment(self) -> set[TopicPartition]:
        return self.held

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if self.fail:
            self.fail -= 1
            raise CommitFailedError("rebalancing")
        self.commits.append(dict(offsets))


def test_the_follower_commits_what_moved_and_again_after_a_failed_commit() -> None:
    extraction, *_ = job(ScriptedModel([]), held_turn())
    follower = LogFollower(
        KafkaConnection("localhost:1"), "ns.memory", "ns.extract", extraction.handle, name="t"
    )
    p0, p1 = TopicPartition("ns.memory", 0), TopicPartition("ns.memory", 1)
    offsets = follower._offsets
    offsets.read(p0, 0)
    offsets.read(p1, 0)
    offsets.done(p0, 0)
    consumer = Consumer({p0}, fail=1)
    asyncio.run(follower._commit(consumer))
    assert consumer.commits == []  # refused while the group rebalanced
    asyncio.run(follower._commit(consumer))
    assert consumer.commits == [{p0: 1}]  # p1 is not held: not committed here
    asyncio.run(follower._commit(consumer))
    assert consumer.commits == [{p0: 1}]  # nothing moved
