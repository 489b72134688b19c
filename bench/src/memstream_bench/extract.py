"""`bench extract`: what extraction costs and what it gets, on LoCoMo turns.

The model alone: the chat model asked about each turn in turn, as the job asks it (one call,
a second when the first answer is not JSON) — its rate is the limit of extraction, since every
turn is a model call. With each answer: whether it was the JSON asked for, the facts per turn,
the share of facts grounded in the turn (most of their words are the turn's: not invented),
and the share of events with a date.

The job: a worker with MEMSTREAM_EXTRACTION on; the same turns published at once; the clock
runs until each has its extraction applied or its dead letter. Beside it, recording's
freshness (publish to recallable, p50 and p99) of turns of a tenant extraction leaves alone,
with the worker idle and then while it extracts (once the turns themselves are projected):
the projection must not wait on the model.

The chat model is the configured one (MEMSTREAM_CHAT_*), or, when none is, the local test
model (memstream.providers.local_chat), started for the run; or, with `--extract-stub S`, a
stub that answers one fact after S seconds and takes no CPU meanwhile (a hosted model's
shape: what extraction costs memstream itself). The figures say which.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.config import Settings
from memstream.errors import ExtractionOutputError, ModelProviderError
from memstream.memory.embeddings import Embedder
from memstream.memory.events import (
    ExtractedFact,
    MemoryEvent,
    MessageRecorded,
    TurnCompleted,
)
from memstream.memory.extraction import Extracting, extract, source_of
from memstream.memory.ports import EventRef
from memstream.providers import chat_model
from memstream.streams.dead_letters import EXTRACTION_CODES, read_dead_letters
from memstream_bench.corpus import DEFAULT_LOCOMO
from memstream_bench.harness import BenchNamespace, chat_settings
from memstream_bench.locomo import load_locomo
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Progress, percentile, ratio

__all__ = ["run_extract"]

_TENANT = "locomo-extract"
_WORDS = re.compile(r"[a-z0-9]{4,}")


def sample_turns(count: int, model_id: str, data: Path = DEFAULT_LOCOMO) -> list[MessageRecorded]:
    """`count` turns of LoCoMo's first conversation, spread over its sessions, as recorded
    messages (speaker, text, the session's date as the turn's time)."""
    conversation = load_locomo(data)[0]
    said = [t for t in conversation.turns if t.text.strip()]
    step = max(len(said) // count, 1)
    return [
        MessageRecorded(
            tenant=_TENANT,
            thread=turn.session,
            source_id=turn.dia_id,
            content=turn.text,
            speaker=turn.speaker,
            recorded_at=turn.at,
            importance=0.5,
            embedding_model=model_id,
        )
        for turn in said[::step][:count]
    ]


def _grounded(fact: ExtractedFact, said: str) -> bool:
    words = set(_WORDS.findall(fact.text.lower()))
    return bool(words) and len(words & set(_WORDS.findall(said.lower()))) >= 0.7 * len(words)


def run_extract(
    settings: Settings, embedder: Embedder, *, count: int = 24, probes: int = 12,
    timeout_s: float = 1200, stub_latency_s: float | None = None, data: Path = DEFAULT_LOCOMO,
) -> BenchResult:  # fmt: skip
    started = time.monotonic()
    progress = Progress("extract")
    with chat_settings(settings, stub_latency_s) as chatting:
        events = sample_turns(count, embedder.model_id, data)
        model = _model_alone(chatting, events, progress)
        job = _the_job(chatting, events, probes, timeout_s, progress)
    model_rate, job_rate = float(model["turns_per_s"]), job["turns_per_s"]
    return BenchResult(
        name="extract",
        figures={
            "model": chatting.chat_model,
            "local_test_model": not settings.chat_base_url and stub_latency_s is None,
            "stub_latency_s": stub_latency_s,
            "turns": count,
            **{f"model_{k}": v for k, v in model.items() if k != "examples"},
            **{f"job_{k}": v for k, v in job.items()},
            "ratio_to_model": ratio(job_rate, model_rate),
            "examples": model["examples"],
        },
        comparisons=[
            Comparison(
                "turns extracted and projected",
                job_rate,
                model_rate,
                "turns/s",
                "the model alone",
                True,
                "≥ 0.9x the model",
            ),
            Comparison(
                "recording freshness p99 while extracting",
                job["busy_freshness_p99_ms"],
                job["idle_freshness_p99_ms"],
                "ms",
                "idle worker",
                False,
                "≤ 1.5x idle",
            ),
        ],
        notes=[
            f"model {chatting.chat_model}"
            + (
                f" (answers one fact after {stub_latency_s} s, no CPU meanwhile)"
                if stub_latency_s is not None
                else " (the local test model: tiny, extracts poorly)"
                if not settings.chat_base_url
                else ""
            ),
            f"answers that were the JSON asked for: {model['json_share']:.0%}; facts per turn "
            f"{model['facts_per_turn']}; grounded in the turn {model['grounded_share']:.0%}",
        ],
        seconds=time.monotonic() - started,
    )


def _model_alone(
    settings: Settings, events: Sequence[MessageRecorded], progress: Progress
) -> dict[str, Any]:
    client = chat_model(settings)
    assert client is not None
    how = Extracting()
    answered, facts, grounded, dated, tokens = 0, 0, 0, 0, 0
    examples: list[dict[str, object]] = []
    t0 = time.perf_counter()
    for n, event in enumerate(events, 1):
        source = source_of(event)
        assert source is not None
        progress.tick("turns asked", n, len(events))
        try:
            got = extract(
                source, client, how, model=settings.chat_model, embedding_model="",
                max_chars=settings.max_record_chars, now=datetime.now(UTC),
            )  # fmt: skip
        except (ExtractionOutputError, ModelProviderError):
            continue
        answered += 1
        facts += len(got.facts)
        tokens += got.input_tokens + got.output_tokens
        grounded += sum(_grounded(f, event.content) for f in got.facts)
        dated += sum(f.event_date is not None for f in got.facts if f.kind == "event")
        if got.facts and len(examples) < 3:
            examples.append({"said": event.content, "facts": [f.text for f in got.facts]})
    seconds = time.perf_counter() - t0
    return {
        "turns_per_s": round(len(events) / seconds, 3),
        "json_share": round(answered / len(events), 3),
        "facts_per_turn": round(facts / max(answered, 1), 2),
        "grounded_share": round(grounded / max(facts, 1), 3),
        "dated_events": dated,
        "tokens_per_turn": round(tokens / max(answered, 1)),
        "examples": examples,
    }


def _the_job(
    settings: Settings,
    events: Sequence[MessageRecorded],
    probes: int,
    timeout_s: float,
    progress: Progress,
) -> dict[str, float]:
    extracting = replace(settings, extraction="discrete", extraction_tenants=(_TENANT,))
    with BenchNamespace(extracting, "extract") as ns:
        probe = _probe(0, ns)
        progress.say("starting a worker that extracts")
        ns.start_worker(probe)
        idle = _freshness(ns, probes, progress, "idle")
        model = extracting.chat_model
        done = [EventRef(_TENANT, Extracting().extraction_id(_TENANT, e.id, model)) for e in events]
        t0 = time.perf_counter()
        ns.publish(events)
        # The turns themselves are recorded first: a probe queued behind their projection
        # would measure recording them, not extracting them.
        ns.wait_applied(events, timeout_s)
        busy = _freshness(ns, probes, progress, "while extracting")
        deadline = time.monotonic() + timeout_s
        while True:
            extracted = len(events) - len(ns.status.unapplied(done))
            letters = asyncio.run(read_dead_letters(ns.kafka, ns.topics)).pending()
            refused = sum(1 for letter in letters if letter.code in EXTRACTION_CODES)
            progress.tick("turns extracted or set aside", extracted + refused, len(events))
            if extracted + refused >= len(events) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        seconds = time.perf_counter() - t0
    return {
        "turns_per_s": round((extracted + refused) / seconds, 3),
        "extracted": extracted,
        "dead_lettered": refused,
        "idle_freshness_p50_ms": percentile(idle, 50),
        "idle_freshness_p99_ms": percentile(idle, 99),
        "busy_freshness_p50_ms": percentile(busy, 50),
        "busy_freshness_p99_ms": percentile(busy, 99),
    }


def _probe(n: int, ns: BenchNamespace) -> TurnCompleted:
    return TurnCompleted(
        tenant=f"fresh-{n % 4}", thread="t", run=uuid.uuid4().hex[:8], turn=n,
        query=f"probe {n}: the boiler was serviced", answer="noted", recorded_at=datetime.now(UTC),
        importance=0.5, embedding_model=ns.deployment.embedding_model,
    )  # fmt: skip


def _freshness(ns: BenchNamespace, probes: int, progress: Progress, when: str) -> list[float]:
    """Publish-to-applied of `probes` turns extraction leaves alone, one at a time, in ms (the
    producer connected before the first)."""

    async def measure() -> list[float]:
        waits = []
        async with ns.deployment.event_publisher() as publisher:
            for n in range(1, probes + 1):
                event: MemoryEvent = _probe(n, ns)
                t0 = time.perf_counter()
                await publisher.publish([event])
                # Polling is the point: the state changes in another process, not this loop.
                while ns.status.unapplied([event]):  # noqa: ASYNC110
                    await asyncio.sleep(0.002)
                waits.append((time.perf_counter() - t0) * 1000)
                progress.tick(f"freshness {when}", n, probes)
        return waits

    return asyncio.run(measure())
