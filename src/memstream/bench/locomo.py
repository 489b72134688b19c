"""`bench locomo`: retrieval quality on LoCoMo, through memstream's own path, beside baselines.

Each conversation is one tenant and each dialogue turn one memory (a `MessageRecorded` keyed
by its `dia_id`, which stays in the memory's metadata with the session date). The turns are
published to Kafka and projected by a real `memstream worker`; each question (category 5,
adversarial, skipped) is then asked through `RedisRecaller.search` — the hybrid recall of
`memstream recall` — and scored by evidence recall@1/5/10.

Beside it, computed in the same run over the same stored texts:
- `bm25`: in-process Okapi BM25 (`baselines.BM25`);
- `vector`: exact cosine over the very vectors the worker stored (read back from Redis);
- `bm25+vector rrf`: the two fused in-process by reciprocal rank, as the data README did;
- `memstream vector-only`: memstream's own KNN path, a check on the vector baseline.

What a memory holds is chosen by `--content` (see `CONTENT_STYLES`); the speaker's name is in
the text by default because questions name people (docs/benchmarks.md has the figures).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memstream.bench.baselines import BM25, RecallAtK, cosine_ranking
from memstream.bench.corpus import DEFAULT_LOCOMO
from memstream.bench.harness import BenchNamespace
from memstream.bench.report import BenchResult, Comparison
from memstream.bench.stats import Progress
from memstream.config import Settings
from memstream.errors import InvalidInputError
from memstream.memory.embeddings import Embedder
from memstream.memory.events import MessageRecorded, memories_of
from memstream.projections.fusion import RRF_K, reciprocal_rank_fusion
from memstream.projections.recall import CANDIDATES, HybridQuery, RedisRecaller, VectorQuery
from memstream.projections.schema import Fields

__all__ = ["CONTENT_STYLES", "Conversation", "load_locomo", "run_locomo"]

_DIA_ID = re.compile(r"D\d+:\d+")
_DEPTH = 10


def _text(speaker: str, text: str, date: str, caption: str) -> str:
    return text


def _speaker(speaker: str, text: str, date: str, caption: str) -> str:
    return f"{speaker}: {text}"


def _speaker_caption(speaker: str, text: str, date: str, caption: str) -> str:
    shared = f" [shares a photo of {caption}]" if caption else ""
    return f"{speaker}: {text}{shared}"


def _speaker_date(speaker: str, text: str, date: str, caption: str) -> str:
    return f"[{date}] {_speaker_caption(speaker, text, date, caption)}"


CONTENT_STYLES: dict[str, Callable[[str, str, str, str], str]] = {
    "text": _text,
    "speaker": _speaker,
    "speaker-caption": _speaker_caption,
    "speaker-date": _speaker_date,
}
DEFAULT_STYLE = "speaker-caption"


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str
    session: str
    date_text: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def _session_time(raw: str) -> datetime | None:
    try:
        return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def load_locomo(path: Path) -> list[Conversation]:
    """Conversations of a LoCoMo file; questions keep only evidence ids that name a turn."""
    try:
        samples = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"cannot read the LoCoMo file {path}: {exc}") from None
    conversations = []
    for sample in samples:
        conversation = sample["conversation"]
        turns: list[Turn] = []
        sessions = sorted(
            (int(k.split("_")[1]), v)
            for k, v in conversation.items()
            if re.fullmatch(r"session_\d+", k) and isinstance(v, list)
        )
        for number, session in sessions:
            date_text = conversation.get(f"session_{number}_date_time", "")
            start = _session_time(date_text) or datetime(2000, 1, 1, tzinfo=UTC)
            for i, turn in enumerate(session):
                turns.append(
                    Turn(
                        dia_id=turn["dia_id"],
                        speaker=turn["speaker"],
                        text=turn.get("text", ""),
                        caption=turn.get("blip_caption", ""),
                        session=f"session_{number}",
                        date_text=date_text,
                        at=start + timedelta(seconds=i),
                    )
                )
        known = {t.dia_id for t in turns}
        questions = []
        for qa in sample["qa"]:
            # A few evidence entries are malformed ("D8:6; D9:17"): take every id they name.
            named = {m for e in qa.get("evidence", []) for m in _DIA_ID.findall(e)}
            evidence = tuple(sorted(named & known))
            if evidence:
                questions.append(Question(qa["question"], evidence, int(qa["category"])))
        conversations.append(Conversation(sample["sample_id"], tuple(turns), tuple(questions)))
    return conversations


def _events(
    conversation: Conversation, style: str, model_id: str, max_chars: int
) -> list[MessageRecorded]:
    render = CONTENT_STYLES[style]
    events = []
    for turn in conversation.turns:
        content = render(turn.speaker, turn.text, turn.date_text, turn.caption)[:max_chars]
        if not content.strip():
            continue
        events.append(
            MessageRecorded(
                tenant=conversation.sample_id,
                thread=turn.session,
                source_id=turn.dia_id,
                content=content,
                speaker=turn.speaker,
                recorded_at=turn.at,
                importance=0.5,
                embedding_model=model_id,
                metadata={"dia_id": turn.dia_id, "session_date": turn.date_text},
            )
        )
    return events


def run_locomo(
    settings: Settings,
    embedder: Embedder,
    *,
    data: Path = DEFAULT_LOCOMO,
    style: str = DEFAULT_STYLE,
    rrf_k: int = RRF_K,
    candidates: int = CANDIDATES,
    conversations: int | None = None,
    questions: int | None = None,
    timeout_s: float = 600,
) -> BenchResult:
    if style not in CONTENT_STYLES:
        raise InvalidInputError(f"--content must be one of {sorted(CONTENT_STYLES)}, got {style!r}")
    started = time.monotonic()
    progress = Progress("locomo")
    loaded = load_locomo(data)[:conversations]
    per_conversation = {
        c.sample_id: _events(c, style, embedder.model_id, settings.max_record_chars) for c in loaded
    }
    events = [e for es in per_conversation.values() for e in es]
    scores: dict[str, RecallAtK] = {
        name: RecallAtK()
        for name in ("memstream", "bm25", "vector", "bm25+vector rrf", "memstream vector-only")
    }
    asked = 0
    with BenchNamespace(settings, "locomo") as ns:
        progress.say("starting a worker")
        probe = MessageRecorded(
            tenant="__probe__",
            thread="t",
            source_id="probe",
            content="probe",
            speaker="",
            recorded_at=datetime.now(UTC),
            importance=0.5,
            embedding_model=embedder.model_id,
        )
        ns.start_worker(probe)
        progress.say(f"importing {len(events)} turns of {len(loaded)} conversations via Kafka")
        t0 = time.perf_counter()
        ns.publish(events)
        ns.wait_applied(
            events, timeout_s, lambda d, t: progress.tick("conversations projected", d, t)
        )
        import_s = time.perf_counter() - t0
        ns.stop_worker()

        recaller = RedisRecaller(ns.redis, ns.keys, embedder, url=ns.settings.redis)
        total = sum(len([q for q in c.questions if q.category != 5]) for c in loaded)
        budget = questions if questions is not None else total
        for conversation in loaded:
            tenant_events = per_conversation[conversation.sample_id]
            dia_ids = [e.source_id for e in tenant_events]
            texts = [e.content for e in tenant_events]
            vectors = _stored_vectors(ns, tenant_events)
            bm25 = BM25(texts)
            for question in conversation.questions:
                if question.category == 5 or asked >= budget:
                    continue
                vector = embedder.embed_query(question.text)
                hybrid = HybridQuery(
                    conversation.sample_id, question.text, vector, _DEPTH, candidates, rrf_k
                )
                ranked = [h.memory.metadata["dia_id"] for h in recaller.search(hybrid)]
                vector_only = recaller.search_vector(
                    VectorQuery(conversation.sample_id, vector, _DEPTH)
                )
                by_words = bm25.rank(question.text, candidates)
                by_meaning = cosine_ranking(vectors, vector, candidates)
                fused = [i for i, _ in reciprocal_rank_fusion([by_words, by_meaning], k=rrf_k)]
                scores["memstream"].add(ranked, question.evidence)
                scores["memstream vector-only"].add(
                    [h.memory.metadata["dia_id"] for h in vector_only], question.evidence
                )
                scores["bm25"].add([dia_ids[i] for i in by_words], question.evidence)
                scores["vector"].add([dia_ids[i] for i in by_meaning], question.evidence)
                scores["bm25+vector rrf"].add([dia_ids[i] for i in fused], question.evidence)
                asked += 1
                progress.tick("questions", asked, budget)

    ours = scores["memstream"].as_json()
    baselines = {name: s.as_json() for name, s in scores.items() if name != "memstream"}
    figures: dict[str, Any] = {
        **ours,
        "baselines": baselines,
        "questions": asked,
        "conversations": len(loaded),
        "memories": len(events),
        "content": style,
        "rrf_k": rrf_k,
        "candidates": candidates,
        "import_seconds": round(import_s, 1),
        "data": str(data),
    }
    comparisons = [
        Comparison(
            f"recall@10 vs {name}",
            ours["recall@10"],
            baselines[name]["recall@10"],
            "",
            name,
            True,
            "above both baselines" if name in ("bm25", "vector") else "",
        )
        for name in ("bm25", "vector", "bm25+vector rrf")
    ] + [
        Comparison(
            f"recall@{k} vs bm25",
            ours[f"recall@{k}"],
            baselines["bm25"][f"recall@{k}"],
            "",
            "bm25",
            True,
        )
        for k in (1, 5)
    ]
    return BenchResult("locomo", figures, comparisons, (), time.monotonic() - started)


def _stored_vectors(ns: BenchNamespace, events: list[MessageRecorded]) -> np.ndarray:
    """The vectors the worker stored for `events`, in order: the vector baseline's documents."""
    pipe = ns.redis.pipeline(transaction=False)
    for event in events:
        memory = memories_of(event)[0]
        pipe.hget(ns.keys.memory(memory.tenant, memory.id), Fields.EMBEDDING)
    blobs = pipe.execute()
    return np.stack([np.frombuffer(blob, dtype=np.float32) for blob in blobs])
