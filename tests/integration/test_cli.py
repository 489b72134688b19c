"""The operator commands against the real stack, run as a user runs them: each a process of
its own."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from .commands import memstream, memstream_process
from .helpers import TestStack, wait_until

pytestmark = pytest.mark.integration


def write_lines(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_import_wait_then_recall_json(
    stack: TestStack, env: dict[str, str], tmp_path: Path
) -> None:
    tenant = f"imp-{uuid.uuid4().hex[:6]}"
    rows = [
        {
            "tenant": tenant,
            "thread": "s1",
            "content": "Caroline went to the LGBTQ support group on 7 May.",
            "speaker": "Caroline",
            "ts": "2023-05-08T13:56:00",
            "metadata": {"dia_id": "D1:3"},
        },
        {
            "tenant": tenant,
            "thread": "s1",
            "query": "What do you paint?",
            "answer": "Mostly sunsets over the lake.",
        },
    ]
    imported = memstream_process(
        env, "import", str(write_lines(tmp_path / "in.jsonl", rows)), "--wait"
    )
    assert imported.returncode == 0, imported.stderr
    assert "imported 2 events for 1 tenants; recallable" in imported.stderr

    recalled = memstream_process(
        env,
        "recall",
        "--tenant",
        tenant,
        "--k",
        "3",
        "--json",
        "When did Caroline go to the support group?",
    )
    assert recalled.returncode == 0, recalled.stderr
    hits = json.loads(recalled.stdout)
    assert len(hits) == 3
    best = hits[0]
    assert best["content"] == "Caroline went to the LGBTQ support group on 7 May."
    assert best["metadata"] == {"dia_id": "D1:3"}
    assert best["thread"] == "s1" and best["memory_type"] == "conversation"
    assert best["timestamp"] == "2023-05-08T13:56:00+00:00"
    assert best["importance"] == 0.5 and best["role"] == "Caroline"
    assert {"id", "score"} <= best.keys()
    lineage = best["provenance"]
    assert (lineage["event_type"], lineage["thread"]) == ("MessageRecorded", "s1")
    assert lineage["recorded_at"] == "2023-05-08T13:56:00+00:00" and lineage["offset"] >= 0
    turns = [h["provenance"] for h in hits if h["content"] == "Mostly sunsets over the lake."]
    assert [t["event_type"] for t in turns] == ["TurnCompleted"]
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)

    again = memstream_process(env, "import", str(tmp_path / "in.jsonl"), "--wait")
    assert again.returncode == 0, again.stderr
    assert stack.stored_memories(tenant) == 3  # the second import added nothing


def test_recall_of_an_unknown_tenant_is_an_empty_list(
    stack: TestStack, env: dict[str, str]
) -> None:
    recalled = memstream_process(
        env, "recall", "--tenant", f"nobody-{uuid.uuid4().hex}", "--json", "anything"
    )
    assert recalled.returncode == 0, recalled.stderr
    assert json.loads(recalled.stdout) == []


def test_recall_refuses_an_invalid_tenant_clearly(stack: TestStack, env: dict[str, str]) -> None:
    recalled = memstream_process(env, "recall", "--tenant", "   ", "anything")
    assert recalled.returncode == 2
    assert "the tenant id is empty" in recalled.stderr


def test_import_rejects_a_bad_line_by_number_and_sends_nothing(
    stack: TestStack, env: dict[str, str], tmp_path: Path
) -> None:
    tenant = f"bad-{uuid.uuid4().hex[:6]}"
    good = {"tenant": tenant, "thread": "t", "content": "fine"}
    path = write_lines(
        tmp_path / "bad.jsonl",
        [good, good | {"content": "also fine"}, {"tenant": tenant, "thread": "t", "content": ""}],
    )
    before = stack.end_offsets(stack.topics.memory)

    result = memstream_process(env, "import", str(path), "--wait")

    assert result.returncode == 2
    assert "line 3: 'content' must be non-empty text" in result.stderr
    assert "Nothing was imported" in result.stderr
    assert stack.end_offsets(stack.topics.memory) == before


def test_up_is_idempotent_when_the_stack_runs(stack: TestStack, env: dict[str, str]) -> None:
    result = memstream_process(env, "up")
    assert result.returncode == 0, result.stderr
    assert "kafka: already running" in result.stdout
    assert "redis: already running" in result.stdout


def test_an_unreachable_redis_is_named_with_what_to_do(env: dict[str, str]) -> None:
    result = memstream_process(
        env | {"MEMSTREAM_REDIS_URL": "redis://:secret@127.0.0.1:1/0"},
        "recall",
        "--tenant",
        "a",
        "q",
    )
    assert result.returncode == 2
    assert "Redis at redis://***@127.0.0.1:1/0 did not answer while recalling" in result.stderr
    assert "MEMSTREAM_REDIS_URL" in result.stderr
    assert "secret" not in result.stderr


def test_an_unreachable_kafka_imports_nothing_and_says_so(
    env: dict[str, str], tmp_path: Path
) -> None:
    path = write_lines(tmp_path / "one.jsonl", [{"tenant": "a", "thread": "t", "content": "x"}])
    result = memstream_process(
        env | {"MEMSTREAM_KAFKA_BOOTSTRAP": "127.0.0.1:1"}, "import", str(path)
    )
    assert result.returncode == 2
    assert result.stderr.startswith("memstream: could not create memstream's topics on Kafka")
    assert "MEMSTREAM_KAFKA_BOOTSTRAP" in result.stderr


def test_chat_remembers_across_threads_of_a_tenant(stack: TestStack, env: dict[str, str]) -> None:
    tenant = f"chat-{uuid.uuid4().hex[:6]}"
    offline = env | {"MEMSTREAM_CHAT_BASE_URL": ""}
    told = memstream_process(
        offline,
        "chat",
        "--tenant",
        tenant,
        "--thread",
        "one",
        input="My favourite colour is teal.\n",
    )
    assert told.returncode == 0, told.stderr
    assert "offline echo model" in told.stdout
    assert "(usage: 1 calls," in told.stdout
    wait_until(lambda: stack.stored_memories(tenant) == 2, "the told turn to be projected")

    asked = memstream_process(
        offline,
        "chat",
        "--tenant",
        tenant,
        "--thread",
        "two",
        input="What is my favourite colour?\n",
    )
    assert asked.returncode == 0, asked.stderr
    assert "From my semantic-memory section:" in asked.stdout
    assert "My favourite colour is teal." in asked.stdout


def test_the_demo_recalls_both_facts_of_its_compound_question(
    stack: TestStack, env: dict[str, str]
) -> None:
    # "Which database do we use, and when do we deploy?": for acme the two facts are said in
    # different turns of one thread; the deploy day came fourth, behind an invoice address,
    # until thread neighbours (issue 36).
    done = memstream(env, "demo")
    assert done.returncode == 0, done.stderr
    for tenant, facts in (("acme", ("PostgreSQL", "Tuesday")), ("globex", ("MongoDB", "Friday"))):
        heading = f"[{tenant}] Which database do we use, and when do we deploy?"
        lines = done.stdout.splitlines()
        top3 = "\n".join(lines[lines.index(heading) + 1 : lines.index(heading) + 4])
        assert all(fact in top3 for fact in facts), f"{tenant}'s top 3:\n{top3}"
