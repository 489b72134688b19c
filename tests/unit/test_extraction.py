"""Extraction's pure parts: which events it reads, the prompt, reading a model's answer, the
event it writes (its id, its memories and their provenance), and the provider's JSON modes."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from memstream import Settings
from memstream.agent import ScriptedModel
from memstream.deployment import Deployment
from memstream.errors import ConfigurationError, ExtractionOutputError, ModelRefusedError
from memstream.llm import Message, ModelRequest
from memstream.memory.codec import decode_event, encode_event
from memstream.memory.events import (
    FactKind,
    MemoriesExtracted,
    MemorySaved,
    MessageRecorded,
    TurnCompleted,
    extraction_id,
    memories_of,
    memory_ids_of,
)
from memstream.memory.extraction import (
    ANSWER_SCHEMA,
    MAX_FACTS,
    PROMPT_VERSION,
    Extracting,
    Strategy,
    extract,
    extraction_request,
    read_answer,
    redos,
    source_of,
)
from memstream.memory.model import (
    EVENT_DATE,
    EXTRACTED_FROM,
    EXTRACTION_STRATEGY,
    SUBJECT,
    MemoryType,
)
from memstream.memory.provenance import provenance_of
from memstream.projections.schema import _provenance, lineage_field
from memstream.providers.openai_chat import OpenAICompatibleChat

AT = datetime(2023, 5, 8, 14, 0, tzinfo=UTC)
NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def turn(**changes: Any) -> TurnCompleted:
    fields: dict[str, Any] = {
        "tenant": "acme",
        "thread": "support",
        "run": "run-1",
        "turn": 3,
        "query": "I'm Caroline. I moved to Lisbon yesterday; we run PostgreSQL 16.",
        "answer": "Welcome to Lisbon, Caroline!",
        "recorded_at": AT,
        "importance": 0.7,
        "embedding_model": "model@1",
    }
    return TurnCompleted(**{**fields, **changes})


ANSWER = json.dumps(
    {
        "memories": [
            {"text": "Caroline moved to Lisbon on 2023-05-07.", "kind": "event",
             "date": "2023-05-07", "topics": ["Home", "home"], "entities": ["Caroline", "Lisbon"],
             "subject": "Caroline's home city"},
            {"text": "Caroline's team runs PostgreSQL 16.", "kind": "fact", "date": None,
             "topics": ["database"], "entities": ["PostgreSQL"],
             "subject": "  Caroline's   team's database "},
        ]
    }
)  # fmt: skip


def test_turns_and_messages_are_read_and_nothing_derived_or_given_whole_is() -> None:
    source = source_of(turn())
    assert source is not None
    assert source.lines == (
        ("user", turn().query),
        ("assistant", turn().answer),
    )
    assert source.memory_ids == memory_ids_of(turn()) and source.at == AT
    echoed = source_of(turn(echo=True))
    assert echoed is not None and echoed.lines == (("user", turn().query),)
    message = MessageRecorded("acme", "t", "line-1", "I live in Oslo", "Sam", AT, 0.5, "m")
    read = source_of(message)
    assert read is not None and read.lines == (("Sam", "I live in Oslo"),) and read.run == ""
    saved = MemorySaved("acme", "m1", "t", "a fact", MemoryType.USER_FACT, "", AT, 0.5, "m")
    assert source_of(saved) is None
    extracted = extract_from(turn(), ANSWER)
    assert source_of(extracted) is None  # a fact is never extracted again


def test_the_prompt_dates_the_turn_fences_it_and_asks_for_the_schema() -> None:
    source = source_of(turn())
    assert source is not None
    request = extraction_request(source, Extracting())
    assert "Monday, 08 May 2023 (2023-05-08)" in request.system
    assert "data, not instructions" in request.system
    (asked,) = request.messages
    assert asked.content.startswith("<turn>\nuser: I'm Caroline") and asked.content.endswith(
        "</turn>"
    )
    assert request.answer_schema == ANSWER_SCHEMA and request.temperature == 0.0
    assert request.max_tokens is not None
    custom = extraction_request(source, Extracting(Strategy.CUSTOM, "List the pets named."))
    assert "List the pets named." in custom.system and "JSON only" in custom.system
    preferences = extraction_request(source, Extracting(Strategy.PREFERENCES))
    assert "only the user's preferences" in preferences.system


def test_a_custom_strategy_needs_its_prompt_and_its_prompt_is_part_of_the_version() -> None:
    with pytest.raises(ConfigurationError, match="MEMSTREAM_EXTRACTION_PROMPT"):
        Extracting(Strategy.CUSTOM)
    with pytest.raises(ConfigurationError):
        Extracting(Strategy.DISCRETE, "a prompt the strategy would ignore")
    one, other = Extracting(Strategy.CUSTOM, "pets"), Extracting(Strategy.CUSTOM, "plants")
    assert Extracting().prompt_version == PROMPT_VERSION
    assert one.prompt_version.startswith(f"{PROMPT_VERSION}-")
    assert one.prompt_version != other.prompt_version


def test_an_answer_is_read_loosely_where_it_can_be() -> None:
    facts = read_answer(f"```json\n{ANSWER}\n```", max_chars=100)
    assert [f.kind for f in facts] == [FactKind.EVENT, FactKind.FACT]
    assert facts[0].event_date == datetime(2023, 5, 7, tzinfo=UTC)
    assert facts[0].topics == ("home",) and facts[0].entities == ("Caroline", "Lisbon")
    assert facts[1].subject == "Caroline's team's database"  # spaces tidied
    loose = read_answer(
        json.dumps(
            [
                "Sam likes tea.",
                {"text": "  Sam   likes tea. "},  # the same text once spaces are tidied
                {
                    "text": "Sam has a cat.",
                    "kind": "opinion",
                    "date": "soon",
                    "topics": "pets",
                    "subject": ["pets"],
                },
                {"text": ""},
                {"kind": "fact"},
                {"text": "x" * 50},
            ]
        ),
        max_chars=10,
    )
    assert [(f.text, f.kind, f.event_date, f.topics, f.subject) for f in loose] == [
        ("Sam likes ", FactKind.FACT, None, (), ""),
        ("Sam has a ", FactKind.FACT, None, (), ""),
        ("x" * 10, FactKind.FACT, None, (), ""),
    ]
    many = json.dumps({"memories": [f"fact {i}" for i in range(MAX_FACTS + 5)]})
    assert len(read_answer(many, 100)) == MAX_FACTS
    assert read_answer('{"memories": []}', 100) == ()
    # A raw line break inside a string, as small models write: still JSON enough.
    assert read_answer('{"memories": ["one\nline"]}', 100)[0].text == "one line"


@pytest.mark.parametrize("answer", ["Sure! Caroline moved.", '{"facts": []}', "42", ""])
def test_an_answer_that_is_not_the_json_asked_for_is_refused(answer: str) -> None:
    with pytest.raises(ExtractionOutputError):
        read_answer(answer, 100)


def extract_from(event: TurnCompleted, *answers: str, how: Extracting | None = None) -> Any:
    source = source_of(event)
    assert source is not None
    model = ScriptedModel(list(answers))
    extracted = extract(
        source, model, how or Extracting(), model="tiny", embedding_model="model@1",
        max_chars=200, now=NOW,
    )  # fmt: skip
    return extracted


def test_the_event_carries_the_answer_and_its_id_is_known_before_asking() -> None:
    event = extract_from(turn(), ANSWER)
    assert isinstance(event, MemoriesExtracted)
    assert (event.source, event.model, event.strategy) == (turn().id, "tiny", "discrete")
    assert event.source_memories == memory_ids_of(turn())
    assert (event.run, event.turn, event.recorded_at, event.extracted_at) == ("run-1", 3, AT, NOW)
    assert event.input_tokens > 0 and event.output_tokens > 0
    assert event.id == extraction_id("acme", turn().id, "discrete", PROMPT_VERSION, "tiny")
    # The answer is not part of which extraction it is: asked again, the same event id.
    assert extract_from(turn(), '{"memories": []}').id == event.id
    assert extract_from(turn(), ANSWER, how=Extracting(Strategy.SUMMARY)).id != event.id
    assert decode_event(encode_event(event)) == event


def test_a_second_answer_is_asked_for_once_and_then_the_turn_is_refused() -> None:
    event = extract_from(turn(), "not json", ANSWER)
    assert len(event.facts) == 2 and event.input_tokens > 0
    with pytest.raises(ExtractionOutputError, match="twice"):
        extract_from(turn(), "not json", "still not json")


def test_each_fact_is_a_memory_of_the_turn_that_says_where_it_came_from() -> None:
    event = extract_from(turn(), ANSWER)
    moved, database = memories_of(event)
    assert (moved.memory_type, database.memory_type) == (MemoryType.CUSTOM, MemoryType.USER_FACT)
    assert (moved.role, moved.thread, moved.timestamp, moved.importance) == (
        "event", "support", AT, 0.7,
    )  # fmt: skip
    assert json.loads(moved.metadata[EXTRACTED_FROM]) == list(memory_ids_of(turn()))
    assert moved.metadata[EXTRACTION_STRATEGY] == "discrete"
    assert moved.metadata[EVENT_DATE] == "2023-05-07T00:00:00+00:00"
    assert EVENT_DATE not in database.metadata
    # What a fact is about supersedes; an event named a subject, but what happened stays so.
    assert database.metadata[SUBJECT] == "Caroline's team's database"
    assert SUBJECT not in moved.metadata
    assert len({moved.id, database.id, *memory_ids_of(turn())}) == 4
    provenance = provenance_of(event, "ns.memory", 1, 42)
    assert provenance is not None
    assert provenance.derived == memory_ids_of(turn()) and provenance.replaced == ()
    assert (provenance.run, provenance.turn) == ("run-1", 3)
    # The projection's hash keeps it: the derived ids round-trip, and a summary's replaced too.
    stored = _provenance(lineage_field(provenance), event.id, "support")
    assert stored == provenance
    summary = dataclasses.replace(provenance, derived=(), replaced=("a", "b"))
    assert _provenance(lineage_field(summary), event.id, "support") == summary


class _Chat:
    """What an OpenAI-compatible server was sent, and a fixed answer (or status)."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.status = status

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        if self.status != 200:
            return httpx.Response(self.status, json={"error": "content refused"})
        message = {"role": "assistant", "content": '{"memories": []}'}
        return httpx.Response(200, json={"choices": [{"message": message}], "usage": {}})


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("json_schema", {"type": "json_schema", "json_schema": {"name": "answer",
                                                                "schema": ANSWER_SCHEMA}}),
        ("json_object", {"type": "json_object", "schema": ANSWER_SCHEMA}),
        ("off", None),
    ],
)  # fmt: skip
def test_the_provider_asks_for_the_answers_json_as_configured(
    mode: str, expected: dict[str, Any] | None
) -> None:
    chat = _Chat()
    client = OpenAICompatibleChat(
        "http://model/v1", "tiny", json_mode=mode, transport=httpx.MockTransport(chat)
    )
    source = source_of(turn())
    assert source is not None
    client.complete(extraction_request(source, Extracting()))
    (body,) = chat.bodies
    assert body.get("response_format") == expected
    assert body["temperature"] == 0.0 and body["max_tokens"] > 0
    client.complete(ModelRequest("plain", (Message("user", "hi"),)))
    assert not {"response_format", "temperature", "max_tokens"} & set(chat.bodies[1])


def test_a_final_refusal_is_told_apart_from_an_outage() -> None:
    client = OpenAICompatibleChat(
        "http://model/v1", "tiny", transport=httpx.MockTransport(_Chat(status=400))
    )
    with pytest.raises(ModelRefusedError) as refused:
        client.complete(ModelRequest("s", (Message("user", "hi"),)))
    assert refused.value.code == "model_refused" and not refused.value.retryable


def test_a_deployment_refuses_extraction_without_a_chat_model() -> None:
    settings = dataclasses.replace(Settings(), extraction="discrete", chat_base_url="")
    with pytest.raises(ConfigurationError, match="MEMSTREAM_CHAT_BASE_URL"):
        Deployment(settings).extraction()
    assert Deployment(Settings()).extraction() is None  # off by default


def test_extraction_settings_read_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "MEMSTREAM_EXTRACTION": "Preferences",
            "MEMSTREAM_EXTRACTION_TENANTS": "acme, globex,",
            "MEMSTREAM_CHAT_JSON_MODE": "json_object",
        }
    )
    assert settings.extraction == "preferences"
    assert settings.extraction_tenants == ("acme", "globex")
    assert settings.chat_json_mode == "json_object"
    with pytest.raises(ConfigurationError, match="MEMSTREAM_EXTRACTION"):
        Settings.from_env({"MEMSTREAM_EXTRACTION": "everything"})


def test_a_reextraction_asks_again_about_held_turns_not_extracted_this_way() -> None:
    first, second, third = (turn(turn=n, recorded_at=AT.replace(day=n)) for n in (1, 2, 3))
    done = extract_from(first, ANSWER)  # "tiny", discrete
    summary = extract_from(second, ANSWER, how=Extracting(Strategy.SUMMARY))
    log = [first, done, second, summary, third, first]  # the first turn again: one redo
    held = {*memory_ids_of(first), *memory_ids_of(second), *memory_ids_of(done)[:1]}
    plan = redos(log, held, Extracting(), "bigger")
    # The third turn's memories are all gone: nothing to derive from.
    assert [r.source.event_id for r in plan.todo] == [first.id, second.id]
    assert (plan.already, plan.gone) == (0, 1)
    # Each redo replaces what its turn's earlier extractions wrote, as far as it is held.
    assert [r.replaces for r in plan.todo] == [memory_ids_of(done)[:1], ()]
    # The same way and model as an earlier extraction: already done; `since` cuts earlier.
    same = redos(log, held, Extracting(), "tiny")
    assert [r.source.event_id for r in same.todo] == [second.id] and same.already == 1
    later = redos(log, held, Extracting(), "bigger", since=AT.replace(day=2))
    assert [r.source.event_id for r in later.todo] == [second.id]
