"""Extraction end to end, with a real LLM (memstream.providers.local_chat): a worker with
MEMSTREAM_EXTRACTION on, on a namespace of its own, derives memories from recorded turns;
they are events in the log, traced to their turn, extracted once, and rebuilt by replay and
verify with the model's endpoint down."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from memstream import Settings, TurnCompleted
from memstream.deployment import Deployment
from memstream.memory.events import (
    ExtractedFact,
    FactKind,
    MemoriesExtracted,
    memories_of,
    memory_ids_of,
)
from memstream.memory.extraction import PROMPT_VERSION
from memstream.memory.history import Change
from memstream.memory.model import EXTRACTED_FROM, EXTRACTION_STRATEGY, Memory
from memstream.operations import drop
from memstream.processes import free_port
from memstream.providers.local_chat import MODEL, local_chat_model

from .commands import memstream
from .helpers import TINY_LOCOMO, TestStack, running_worker, wait_until
from .serving import ams_client, call_tool, mcp_over_http, serving, tenant_key

pytestmark = pytest.mark.integration

SAID = (
    "Hi! I'm Caroline. I went to an LGBTQ support group yesterday and it was so powerful. "
    "We use PostgreSQL 16 at work and deploy every Thursday."
)


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with local_chat_model(tmp_path_factory.mktemp("llm")) as model:
        yield model.settings()


@pytest.fixture(scope="module")
def extracting(
    env: dict[str, str], chat: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """The environment of a worker that extracts for tenants `sam` and `ana` (its probe's
    tenant is left alone), on a namespace of its own, running while the module's tests do."""
    extract_env = {
        **env,
        "MEMSTREAM_NAMESPACE": f"{env['MEMSTREAM_NAMESPACE']}-x",
        "MEMSTREAM_EXTRACTION": "discrete",
        "MEMSTREAM_EXTRACTION_TENANTS": "sam,ana",
        **chat,
    }
    log = tmp_path_factory.mktemp("extracting") / "worker.log"
    try:
        with running_worker(extract_env, log):
            yield extract_env
    finally:
        drop(Deployment(Settings.from_env(extract_env)))


def logged_extractions(deployment: Deployment, tenant: str) -> list[MemoriesExtracted]:
    return [
        entry.event
        for entry in deployment.lineage().log(tenant).events
        if isinstance(entry.event, MemoriesExtracted)
    ]


def extraction_of(deployment: Deployment, turn: TurnCompleted) -> MemoriesExtracted:
    """The turn's extraction, once the log holds it and the projection has applied it."""
    found: list[MemoriesExtracted] = []

    def logged() -> bool:
        found[:] = [e for e in logged_extractions(deployment, turn.tenant) if e.source == turn.id]
        return bool(found)

    wait_until(logged, f"the extraction of {turn.id}", timeout=180)
    (extraction,) = found
    wait_until(lambda: not deployment.status().unapplied([extraction]), "the facts applied")
    return extraction


@dataclass(frozen=True)
class Extracted:
    settings: Settings
    env: dict[str, str]
    turn: TurnCompleted
    extraction: MemoriesExtracted


@pytest.fixture(scope="module")
def extracted(extracting: dict[str, str]) -> Extracted:
    """One turn of `sam`'s, recorded once and extracted by the real model."""
    settings = Settings.from_env(extracting)
    stack = TestStack(settings)
    turn = TurnCompleted(
        tenant="sam", thread="support", run=f"run-{uuid.uuid4().hex[:8]}", turn=0, query=SAID,
        answer="That sounds wonderful, Caroline! Thanks for sharing.",
        recorded_at=datetime(2023, 5, 8, 14, 0, tzinfo=UTC), importance=0.6,
        embedding_model=stack.model_id,
    )  # fmt: skip
    stack.publish([turn])
    with Deployment(settings) as deployment:
        return Extracted(settings, extracting, turn, extraction_of(deployment, turn))


def facts_held(deployment: Deployment, extraction: MemoriesExtracted) -> list[Memory | None]:
    return deployment.reader().memories_by_id("sam", memory_ids_of(extraction))


def test_a_real_model_extracts_a_turn_into_an_event_whose_facts_trace_to_the_turn(
    extracted: Extracted,
) -> None:
    turn, extraction = extracted.turn, extracted.extraction
    assert (extraction.model, extraction.strategy, extraction.prompt_version) == (
        MODEL, "discrete", PROMPT_VERSION,
    )  # fmt: skip
    assert extraction.source_memories == memory_ids_of(turn)
    assert (extraction.thread, extraction.run, extraction.turn) == ("support", turn.run, 0)
    assert extraction.recorded_at == turn.recorded_at and extraction.input_tokens > 0
    with Deployment(extracted.settings) as deployment:
        held = facts_held(deployment, extraction)
        spent = deployment.token_ledger().spent(extraction.extracted_at.date(), turn.tenant)
    # The tokens it cost are on the tenant's ledger (`stats`, the daily budget).
    assert spent[("sam", "extraction:discrete")] >= extraction.input_tokens
    # The model's words are its own; what memstream does with them is not.
    assert [m.content if m else None for m in held] == [m.content for m in memories_of(extraction)]
    for memory in held:
        assert memory is not None and memory.provenance is not None
        assert memory.provenance.derived == memory_ids_of(turn)
        assert memory.provenance.event_type == "MemoriesExtracted"
        assert json.loads(memory.metadata[EXTRACTED_FROM]) == list(memory_ids_of(turn))
        assert memory.metadata[EXTRACTION_STRATEGY] == "discrete"
        assert memory.timestamp == turn.recorded_at and memory.thread == "support"


def test_a_duplicated_turn_is_extracted_once(extracted: Extracted) -> None:
    stack = TestStack(extracted.settings)
    group = f"{stack.topics.worker_group}.extract"
    # The same turn again (a producer's retry, a re-import): once the job's commits pass it,
    # it has read it, and found it extracted. (No second model call to wait on: the tiny
    # model's answers take from one second to minutes.)
    stack.publish([extracted.turn])
    ends = end_offsets(stack)
    wait_until(
        lambda: all(at >= end for at, end in zip(committed(stack, group), ends, strict=True)),
        "the extraction group's commits to pass the duplicate",
    )
    with Deployment(extracted.settings) as deployment:
        sources = [e.source for e in logged_extractions(deployment, "sam")]
    assert sources.count(extracted.turn.id) == 1


def end_offsets(stack: TestStack) -> list[int]:
    """The next offset of each partition of the memory topic."""

    async def read() -> list[int]:
        consumer = AIOKafkaConsumer(**stack.kafka.aiokafka())
        await consumer.start()
        try:
            parts = [
                TopicPartition(stack.topics.memory, p) for p in range(stack.settings.partitions)
            ]
            ends = await consumer.end_offsets(parts)
            return [ends[tp] for tp in parts]
        finally:
            await consumer.stop()

    return asyncio.run(read())


def committed(stack: TestStack, group: str) -> list[int]:
    """The group's committed offset on each partition of the memory topic (0: none)."""

    async def read() -> list[int]:
        consumer = AIOKafkaConsumer(**stack.kafka.aiokafka(), group_id=group)
        await consumer.start()
        try:
            parts = [
                TopicPartition(stack.topics.memory, p) for p in range(stack.settings.partitions)
            ]
            return [await consumer.committed(tp) or 0 for tp in parts]
        finally:
            await consumer.stop()

    return asyncio.run(read())


def test_replay_and_verify_rebuild_the_extracted_memories_with_the_model_down(
    extracted: Extracted,
) -> None:
    # The chat endpoint is a port nobody listens on: any model call would fail.
    down = {**extracted.env, "MEMSTREAM_CHAT_BASE_URL": f"http://127.0.0.1:{free_port()}/v1"}
    with Deployment(extracted.settings) as deployment:
        before = facts_held(deployment, extracted.extraction)
        verified = memstream(down, "verify", "--tenant", "sam", "--timeout", "60")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        replayed = memstream(down, "replay", "--tenant", "sam")
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        after = facts_held(deployment, extracted.extraction)
    assert after == before and all(m is not None for m in after)


def test_a_superseded_fact_is_kept_ranked_below_rebuilt_and_judged_at_any_moment(
    extracted: Extracted,
) -> None:
    # Scripted extractions (the small model names subjects at whim): the rule under test is
    # the projection's, which no model call decides.
    stack = TestStack(extracted.settings)
    tenant = f"lia-{uuid.uuid4().hex[:6]}"  # not extracted by the module's worker
    home = "the user's home city"

    def said(day: int, city: str) -> list[TurnCompleted | MemoriesExtracted]:
        turn = TurnCompleted(
            tenant=tenant, thread="t", run="run-1", turn=day, query="Guess where I live.",
            answer="?", recorded_at=datetime(2023, 5, day, tzinfo=UTC), importance=0.5,
            embedding_model=stack.model_id, echo=True,
        )  # fmt: skip
        fact = ExtractedFact(f"The user lives in {city}.", subject=home)
        return [turn, replace(extracted.extraction, tenant=tenant, thread="t", source=turn.id,
                              source_memories=memory_ids_of(turn), run="run-1", turn=day,
                              facts=(fact,), recorded_at=turn.recorded_at)]  # fmt: skip

    # Paris's fact arrives first and was said later: it supersedes Berlin all the same.
    events = [*said(20, "Paris"), *said(2, "Berlin")]
    stack.publish(events)
    stack.wait_applied(events)
    ask = ("recall", "--tenant", tenant, "--k", "10", "--json")
    question = "Which city does the user live in?"

    def facts(*flags: str, env: dict[str, str] = extracted.env) -> list[tuple[str, str | None]]:
        done = memstream(env, *ask, *flags, question)
        assert done.returncode == 0, done.stdout + done.stderr
        hits = json.loads(done.stdout)
        return [(h["content"], h["valid_to"]) for h in hits if h["memory_type"] == "user_fact"]

    until = "2023-05-20T00:00:00+00:00"
    now = [("The user lives in Paris.", None), ("The user lives in Berlin.", until)]
    assert facts() == now
    # What was true on 10 May: Berlin, and Paris not yet.
    assert facts("--valid-at", "2023-05-10") == [now[1], now[0]]
    # Replayed with the model's endpoint down, the rebuilt projection says the same.
    down = {**extracted.env, "MEMSTREAM_CHAT_BASE_URL": f"http://127.0.0.1:{free_port()}/v1"}
    replayed = memstream(down, "replay", "--tenant", tenant)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert facts(env=down) == now


def test_reextract_replaces_a_turns_facts_reports_its_tokens_and_keeps_to_the_budget(
    extracted: Extracted,
) -> None:
    stack = TestStack(extracted.settings)
    tenant = f"rex-{uuid.uuid4().hex[:6]}"  # not extracted by the module's worker
    said = TurnCompleted(
        tenant=tenant, thread="t", run="run-1", turn=0, query=SAID, answer="Thanks!",
        recorded_at=datetime(2023, 5, 8, 14, tzinfo=UTC), importance=0.5,
        embedding_model=stack.model_id,
    )  # fmt: skip
    # An earlier extraction, by another model: what the reextraction replaces.
    earlier = replace(
        extracted.extraction, tenant=tenant, thread="t", source=said.id, model="older-model",
        source_memories=memory_ids_of(said), run="run-1",
        facts=(ExtractedFact("Caroline uses PostgreSQL."), ExtractedFact("Caroline deploys.")),
    )  # fmt: skip
    stack.publish([said, earlier])
    stack.wait_applied([said, earlier])
    ask = ("reextract", "--tenant", tenant, "--json")
    done = memstream(extracted.env, *ask)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert (report["asked"], report["replaced"], report["failed"]) == (1, 2, [])
    assert report["input_tokens"] > 0 and report["stopped"] == ""
    with Deployment(extracted.settings) as deployment:
        (again,) = [e for e in logged_extractions(deployment, tenant) if e.model == MODEL]
        held = {m.id for m in deployment.reader().memories(tenant)}
        spent = deployment.token_ledger().spent(again.extracted_at.date(), again.tenant)
        replaced = deployment.lineage().history(tenant, memory_ids_of(earlier)[0])[-1]
    assert again.replaces == memory_ids_of(earlier) and again.source == said.id
    assert (replaced.change, replaced.event_id) == (Change.REPLACED, again.id)
    # The earlier facts are gone, the new ones (if the model found any) and the turn held.
    assert held == {*memory_ids_of(said), *memory_ids_of(again)}
    assert (
        spent[(tenant, "extraction:discrete")] == report["input_tokens"] + report["output_tokens"]
    )
    # Run again: extracted this way already, nothing asked.
    repeat = json.loads(memstream(extracted.env, *ask).stdout)
    assert (repeat["asked"], repeat["already"], repeat["input_tokens"]) == (0, 1, 0)
    # Over the tenant's daily budget, it stops before asking, and says so.
    broke = {**extracted.env, "MEMSTREAM_EXTRACTION_DAILY_TOKENS": "1"}
    stopped = memstream(broke, "reextract", "--tenant", tenant, "--strategy", "summary")
    assert stopped.returncode == 1 and "MEMSTREAM_EXTRACTION_DAILY_TOKENS" in stopped.stderr
    assert "0 turns asked again" in stopped.stderr


def test_bench_extract_measures_the_job_against_the_model_alone(
    env: dict[str, str], chat: dict[str, str], tmp_path: Path
) -> None:
    # The module's model, configured as a user configures theirs (no second server).
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_LOCOMO))
    args = ["--extract-turns", "1", "--extract-probes", "2", "--extract-data", str(data)]
    done = memstream({**env, **chat}, "bench", "extract", *args, "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["results"]["extract"]
    assert result["model"] == MODEL and not result["local_test_model"] and result["turns"] == 1
    # Every turn was extracted or set aside as a dead letter, none lost.
    assert result["job_extracted"] + result["job_dead_lettered"] == 1
    assert result["model_turns_per_s"] > 0 and result["job_turns_per_s"] > 0
    assert 0 <= result["model_grounded_share"] <= 1 and 0 <= result["model_json_share"] <= 1
    assert result["job_idle_freshness_p99_ms"] > 0 and result["job_busy_freshness_p99_ms"] > 0


def test_extracted_memories_reach_users_through_the_http_api_and_stats(
    extracted: Extracted, tmp_path: Path
) -> None:
    """What extraction writes, as agent-memory-server's client and `stats` show it. The event
    is written here as the job writes it, so that what is checked does not hang on the tiny
    model's words (the job itself: the tests above)."""
    stack = TestStack(extracted.settings)
    said = stack.turn("reach", "I'm Ana. I moved to Porto last week.", "Welcome!", turn=0)
    home = "Ana's home city"
    facts = (
        ExtractedFact(
            "Ana's city is Porto.", FactKind.FACT, None, ("home",), ("Ana", "Porto"), home
        ),
        ExtractedFact("Ana moved to Porto.", FactKind.EVENT, datetime(2026, 11, 28, tzinfo=UTC)),
        # Held from the day it names, until Porto's fact (said later) superseded it.
        ExtractedFact(
            "Ana's city was Lisbon.", FactKind.FACT, datetime(2020, 1, 1, tzinfo=UTC), subject=home
        ),
    )
    extraction = MemoriesExtracted(
        tenant="reach", thread=said.thread, source=said.id, source_memories=memory_ids_of(said),
        run=said.run, turn=0, facts=facts, strategy="discrete", prompt_version="1", model=MODEL,
        recorded_at=said.recorded_at, extracted_at=said.recorded_at, importance=0.5,
        embedding_model=stack.model_id,
    )  # fmt: skip
    stack.publish([said, extraction])
    stack.wait_applied([extraction])
    key = tenant_key(extracted.env, "reach")

    async def ask(url: str) -> tuple[Any, Any, list[dict[str, Any]], list[tuple[str, ...]]]:
        async with ams_client(url, key) as client:
            semantic = await client.search_long_term_memory(
                text="Ana", memory_type={"eq": "semantic"}, limit=10
            )
            episodic = await client.search_long_term_memory(
                text="Ana", memory_type={"eq": "episodic"}, limit=10
            )
        async with httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {key}"}
        ) as http:
            searched = await http.post(
                "/v1/long-term-memory/search",
                json={"text": "", "extraction_strategy": {"eq": "discrete"}, "limit": 20},
            )
            where = await http.post(
                "/v1/long-term-memory/search",
                json={"text": "Which city does Ana live in?", "memory_type": {"eq": "semantic"}},
            )
        held = [(m["text"], m["subject"], m["valid_to"]) for m in where.json()["memories"]]
        # MCP's tools read the same memories, and the prompt says until when a fact held.
        async with mcp_over_http(url, key) as session:
            found = await call_tool(
                session, "search_long_term_memory", text="Ana", memory_type={"eq": "episodic"}
            )
            prompt = await call_tool(session, "memory_prompt", query="Where does Ana live?")
        assert [m["text"] for m in found["memories"]] == ["Ana moved to Porto."]
        system = prompt["messages"][0]["content"]["text"]
        until = f"Ana's city was Lisbon. (until {said.recorded_at:%Y-%m-%d})"
        assert "Ana's city is Porto." in system and until in system
        return semantic, episodic, searched.json()["memories"], held

    with serving(extracted.env, tmp_path / "server.log") as url:
        semantic, episodic, found, held = asyncio.run(ask(url))
    fact, before = semantic.memories
    assert (fact.text, before.text) == ("Ana's city is Porto.", "Ana's city was Lisbon.")
    # memstream's fields beside AMS's: what a fact is about and until when it held.
    said_at = said.recorded_at.isoformat().replace("+00:00", "Z")
    assert held == [("Ana's city is Porto.", home, None), ("Ana's city was Lisbon.", home, said_at)]
    assert fact.extracted_from == list(memory_ids_of(said))
    assert (fact.topics, fact.entities) == (["home"], ["Ana", "Porto"])
    (event,) = episodic.memories
    assert event.text == "Ana moved to Porto." and event.event_date is not None
    assert event.event_date.date().isoformat() == "2026-11-28"
    # Everything here is discrete: the turn's two memories stored whole, and the facts.
    assert len(found) == 5 and {m["extraction_strategy"] for m in found} == {"discrete"}
    # `stats` shows what the real model's extraction of sam's turn cost today.
    stats = memstream(extracted.env, "stats", "--tenant", "sam", "--json")
    assert stats.returncode == 0, stats.stderr
    spent = json.loads(stats.stdout)["tenants"]["sam"]["tokens_today"]
    assert spent["extraction:discrete"] >= extracted.extraction.input_tokens
