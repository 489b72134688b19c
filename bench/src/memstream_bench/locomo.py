"""`bench locomo`: retrieval quality on LoCoMo, through memstream's own path, beside baselines.

Each conversation is one tenant and each dialogue turn one memory (a `MessageRecorded` keyed
by its `dia_id`, which stays in the memory's metadata with the session date). The turns are
published to Kafka and projected by a real `memstream worker`; each question (categories 1-5)
is then asked through `RedisRecaller.search` — the hybrid recall of `memstream recall` — and
scored by evidence recall@1/5/10 (share of a question's evidence turns in the top k) and
hit@1/5/10 (questions with any evidence turn in the top k, the measure of issue 12's table),
and session recall@5/10 (share of a question's evidence sessions with an evidence turn in the
top k: the level of many published LoCoMo figures), overall, per LoCoMo category, and apart for
the tuning and held-out conversations.

Beside it, computed in the same run over the same stored texts:
- `bm25`: in-process Okapi BM25 (`baselines.BM25`), per conversation;
- `vector`: exact cosine over the very vectors the worker stored (read back from Redis);
- `bm25+vector rrf`: the two fused in-process by reciprocal rank (top `candidates` of each);
- `bm25+vector score fusion`: the two fused in-process as recall fuses them, over every turn;
- `server search`: the HTTP API's and the MCP tools' search (`FilteredSearch`, hybrid mode,
  no filter but the tenant's): what a client of `memstream serve` gets for the question;
- `memstream lexical-only` / `vector-only`: memstream's own path with the vector weight 0 (its
  per-tenant BM25, a check against `bm25`) and its KNN path (a check on `vector`);
- `redis bm25 (index-wide)`: RediSearch's own `SCORER BM25` ranking of the same words, with
  its stemming and the statistics of the whole shared index: the lexical list recall used
  before it computed BM25 per tenant, kept to show that gap.

What a memory holds is chosen by `--content` (see `CONTENT_STYLES`); the speaker's name is in
the text by default because questions name people (docs/benchmarks.md has the figures).

With `--extract`, a chat model (the configured one; else the local test model, tiny: bound it
with `--extract-per-conversation`) extracts each conversation's turns as the extraction job does
(`memory.extraction.extract`, one MemoriesExtracted per turn, projected by the worker), and
`memstream` then ranks turns and facts together, a fact counting as the turn it was derived
from; `memstream turns only` is the same recall with the facts left out: the gain is the
difference (`extraction` in the figures: the model, turns, facts, failures and tokens).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import InvalidInputError, MemstreamError
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.events import MemoriesExtracted, MessageRecorded, memories_of
from memstream.memory.extraction import Extracting, extract, source_of
from memstream.memory.model import Memory, RecalledMemory, derived_from
from memstream.memory.ranking.fusion import RRF_K, RecallTuning, reciprocal_rank_fusion
from memstream.memory.search import SearchFilter
from memstream.projections.recall import (
    CANDIDATES,
    HybridQuery,
    RedisRecaller,
    VectorQuery,
    parse_reply,
)
from memstream.projections.schema import Fields, from_hash, vector_of
from memstream.projections.search import FilteredSearch
from memstream.providers import EmbedderCatalogue, chat_model
from memstream_bench.baselines import BM25, RecallAtK, cosine_ranking
from memstream_bench.corpus import DEFAULT_LOCOMO
from memstream_bench.harness import BenchNamespace, chat_settings
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.stats import Progress

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


# Knobs are chosen on these four dev conversations only; the other three are reported apart,
# a check that what was tuned carries over (docs/benchmarks.md).
TUNING_CONVERSATIONS = frozenset({"conv-26", "conv-30", "conv-41", "conv-42"})
_METHODS = (
    "memstream",
    "memstream lexical-only",
    "memstream vector-only",
    "server search",
    "redis bm25 (index-wide)",
    "bm25",
    "vector",
    "bm25+vector rrf",
    "bm25+vector score fusion",
)


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
    sweep: Mapping[str, Sequence[float]] | None = None,
    timeout_s: float = 600,
    extracting: bool = False,
    extract_turns: int | None = None,
) -> BenchResult:
    """Recall@k and hit@k of memstream and every baseline, overall, per category and per split.

    `sweep` maps a `RecallTuning` field to values also measured through memstream's path (each
    a figure of its own, `memstream <field>=<value>`), for choosing defaults. `extracting`:
    facts extracted from the first `extract_turns` turns of each conversation (None: all) are
    recalled too, and `memstream turns only` measures without them.
    """
    if style not in CONTENT_STYLES:
        raise InvalidInputError(f"--content must be one of {sorted(CONTENT_STYLES)}, got {style!r}")
    tunings = _sweep_tunings(settings, sweep or {})
    started = time.monotonic()
    progress = Progress("locomo")
    loaded = load_locomo(data)[:conversations]
    per_conversation = {
        c.sample_id: _events(c, style, embedder.model_id, settings.max_record_chars) for c in loaded
    }
    events = [e for es in per_conversation.values() for e in es]
    scores = _Scores()
    asked = 0
    tuning = Deployment(settings).recall_tuning()
    lexical_only = replace(tuning, vector_weight=0.0)
    without = _levers_off(tuning)
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
        extraction: dict[str, Any] = {}
        if extracting:
            extraction = _extract(ns, per_conversation, extract_turns, timeout_s, progress)
        ns.stop_worker()
        # A fact counts as the turn it was derived from.
        turn_of = {m.id: e.source_id for e in events for m in memories_of(e)}

        def turns_of(hits: Sequence[RecalledMemory]) -> list[str]:
            return _dia_ids(hits, turn_of)

        recaller = RedisRecaller(
            ns.redis,
            ns.keys,
            EmbedderCatalogue(ns.settings, embedder),
            url=ns.settings.redis,
            tuning=tuning,
        )
        server = FilteredSearch(ns.redis, ns.keys, recaller, url=ns.settings.redis)
        total = sum(len(c.questions) for c in loaded)
        budget = questions if questions is not None else total
        for conversation in loaded:
            tenant_events = per_conversation[conversation.sample_id]
            dia_ids = [e.source_id for e in tenant_events]
            texts = [e.content for e in tenant_events]
            vectors = _stored_vectors(ns, tenant_events, embedder.dims)
            bm25 = BM25(texts)
            split = "tuning" if conversation.sample_id in TUNING_CONVERSATIONS else "held-out"
            sessions = {turn.dia_id: turn.session for turn in conversation.turns}
            for question in conversation.questions:
                if asked >= budget:
                    break
                vector = embedder.embed_query(question.text)
                hybrid = HybridQuery(
                    conversation.sample_id, question.text, vector, _DEPTH, candidates
                )
                rankings: dict[str, list[str]] = {
                    "memstream": turns_of(recaller.search(hybrid)),
                    "memstream lexical-only": turns_of(recaller.search(hybrid, lexical_only)),
                    "memstream vector-only": turns_of(
                        recaller.search_vector(VectorQuery(conversation.sample_id, vector, _DEPTH))
                    ),
                }
                if extracting:
                    rankings[_TURNS_ONLY] = turns_of(recaller.search(hybrid, keep=_said))
                tenant_only = SearchFilter(conversation.sample_id)
                page = server.search(tenant_only, question.text, limit=_DEPTH)
                rankings["server search"] = turns_of(page.hits)
                for name, swept in {**tunings, **without}.items():
                    rankings[name] = turns_of(recaller.search(hybrid, swept))
                rankings["redis bm25 (index-wide)"] = _redis_bm25(ns, hybrid, turn_of)
                word_scores = bm25.scores(question.text)
                by_words = bm25.rank(question.text, candidates)
                cosines = vectors @ vector
                by_meaning = cosine_ranking(vectors, vector, candidates)
                fused = [i for i, _ in reciprocal_rank_fusion([by_words, by_meaning], k=rrf_k)]
                rankings["bm25"] = [dia_ids[i] for i in by_words]
                rankings["vector"] = [dia_ids[i] for i in by_meaning]
                rankings["bm25+vector rrf"] = [dia_ids[i] for i in fused]
                rankings["bm25+vector score fusion"] = [
                    dia_ids[i] for i in _score_fusion(word_scores, cosines, tuning.vector_weight)
                ]
                for name, ranked in rankings.items():
                    scores.add(name, split, question.category, ranked, question.evidence, sessions)
                asked += 1
                progress.tick("questions", asked, budget)

    overall = scores.figures("all")
    ours = overall["memstream"]
    figures: dict[str, Any] = {
        **ours,
        "baselines": {name: f for name, f in overall.items() if name != "memstream"},
        "splits": {split: scores.figures(split) for split in ("tuning", "held-out")},
        "categories": {
            str(category): scores.figures(f"category {category}")
            for category in sorted({q.category for c in loaded for q in c.questions})
        },
        "questions": asked,
        "conversations": len(loaded),
        "tuning_conversations": sorted(TUNING_CONVERSATIONS & set(per_conversation)),
        "memories": len(events),
        "content": style,
        "candidates": candidates,
        "levers": _contributions(scores, without),
        "tuning": tuning.described(),
        "rrf_k": rrf_k,
        "import_seconds": round(import_s, 1),
        "data": str(data),
    }
    if extraction:
        figures["extraction"] = extraction
    comparisons = [
        Comparison(
            f"{metric}@{k} vs {name}",
            ours[f"{metric}@{k}"],
            overall[name][f"{metric}@{k}"],
            "",
            name,
            True,
            target,
        )
        for metric in ("recall", "hit")
        for k in (1, 5, 10)
        for name, target in (
            ("bm25", "hit@1 >= bm25 + 0.03" if (metric, k) == ("hit", 1) else ""),
            ("vector", ""),
            ("bm25+vector rrf", ""),
            ("bm25+vector score fusion", ""),
        )
    ] + [
        Comparison(
            f"session_recall@{k} vs {name}",
            ours[f"session_recall@{k}"],
            overall[name][f"session_recall@{k}"],
            "",
            name,
            True,
            "",
        )
        for k in (5, 10)
        for name in ("bm25", "vector")
    ]
    if extracting:
        comparisons += [
            Comparison(
                f"{metric}@{k} with extracted facts",
                ours[f"{metric}@{k}"],
                overall[_TURNS_ONLY][f"{metric}@{k}"],
                "",
                _TURNS_ONLY,
                True,
                "",
            )
            for metric in ("recall", "hit")
            for k in (1, 5, 10)
        ]
    return BenchResult("locomo", figures, comparisons, (), time.monotonic() - started)


_TURNS_ONLY = "memstream turns only"


def _said(memory: Memory) -> bool:
    return not derived_from(memory)


def _extract(
    ns: BenchNamespace,
    per_conversation: Mapping[str, Sequence[MessageRecorded]],
    turns: int | None,
    timeout_s: float,
    progress: Progress,
) -> dict[str, Any]:
    """Extract the first `turns` turns of each conversation (None: all) with the chat model,
    as the extraction job would, and wait until the worker has projected the facts."""
    chosen = [e for events in per_conversation.values() for e in events[:turns]]
    with chat_settings(ns.settings) as chatting:
        client = chat_model(chatting)
        assert client is not None
        how = Extracting()

        def ask(event: MessageRecorded) -> MemoriesExtracted | None:
            source = source_of(event)
            assert source is not None
            try:
                return extract(
                    source, client, how, model=chatting.chat_model,
                    embedding_model=event.embedding_model,
                    max_chars=chatting.max_record_chars, now=datetime.now(UTC),
                )  # fmt: skip
            except MemstreamError:  # no JSON twice, refused, the model down: counted
                return None

        t0 = time.perf_counter()
        got: list[MemoriesExtracted | None] = []
        with ThreadPoolExecutor(chatting.extraction_concurrency) as pool:
            for answer in pool.map(ask, chosen):
                got.append(answer)
                progress.tick("turns extracted", len(got), len(chosen))
        seconds = time.perf_counter() - t0
    extracted = [e for e in got if e is not None]
    ns.publish(extracted)
    ns.wait_applied(extracted, timeout_s)
    return {
        "model": chatting.chat_model,
        "local_test_model": not ns.settings.chat_base_url,
        "turns": len(chosen),
        "failed": len(chosen) - len(extracted),
        "facts": sum(len(e.facts) for e in extracted),
        "input_tokens": sum(e.input_tokens for e in extracted),
        "output_tokens": sum(e.output_tokens for e in extracted),
        "turns_per_s": round(len(chosen) / seconds, 3) if seconds else 0.0,
    }


def _redis_bm25(ns: BenchNamespace, query: HybridQuery, turn_of: Mapping[str, str]) -> list[str]:
    """RediSearch's BM25 ranking of the query's words (stemmed, index-wide statistics)."""
    command = query.lexical.command(ns.keys.alias)
    if command is None:
        return []
    stemmed = [part for part in command if part != "VERBATIM"]
    reply = ns.redis.execute_command(*stemmed)  # type: ignore[no-untyped-call]
    return _dia_ids([from_hash(hit.fields) for _, hit in parse_reply(reply)], turn_of)[:_DEPTH]


def _dia_ids(hits: Sequence[RecalledMemory | Memory], turn_of: Mapping[str, str]) -> list[str]:
    """The turns `hits` name, best first: a turn's own, or for a fact the turn it was derived
    from (once: a fact and its turn are one hit)."""
    found: dict[str, None] = {}
    for hit in hits:
        memory = hit.memory if isinstance(hit, RecalledMemory) else hit
        sources = derived_from(memory)
        for dia_id in (
            [turn_of[s] for s in sources if s in turn_of]
            if sources
            else [memory.metadata["dia_id"]]
        ):
            found.setdefault(dia_id)
    return list(found)


def _score_fusion(words: Sequence[float], cosines: Vectors, weight: float) -> list[int]:
    """The in-process twin of recall's fusion over every memory: BM25 / best + a * cosine."""
    best = max(words, default=0.0) or 1.0
    fused = np.asarray(words) / best + weight * np.maximum(cosines, 0.0)
    return [int(i) for i in np.argsort(-fused, kind="stable")[:_DEPTH]]


def _levers_off(tuning: RecallTuning) -> dict[str, RecallTuning]:
    """memstream's ranking with each of its levers turned off alone (the lexical list and the
    vector list are the baselines `memstream vector-only` and `memstream lexical-only`)."""
    return {
        "memstream without neighbours": replace(tuning, neighbour_share=0.0),
        "memstream without answers to questions": replace(tuning, answer_share=0.0),
        "memstream without the question weight": replace(tuning, question_weight=1.0),
        "memstream without importance and recency": replace(
            tuning, importance_weight=0.0, recency_weight=0.0
        ),
        # Above 1 only identical contents collapse (ranking.dedup).
        "memstream without deduplication": replace(tuning, duplicate_similarity=1.01),
        "memstream without the reranker": replace(tuning, rerank_depth=0),
    }


def _contributions(scores: _Scores, without: Mapping[str, RecallTuning]) -> dict[str, Any]:
    """What each lever adds on the held-out conversations: the full ranking's figures less
    those with the lever off (`recall@10: 0.09` means it lifts recall@10 by 9 points)."""
    held_out = scores.figures("held-out")
    if "memstream" not in held_out:  # a run over tuning conversations only
        return {}
    ours = held_out["memstream"]
    levers = {name.removeprefix("memstream "): held_out[name] for name in without} | {
        "without meaning (vectors)": held_out["memstream lexical-only"],
        "without words (BM25), without the rest": held_out["memstream vector-only"],
    }
    return {
        lever: {
            metric: round(ours[metric] - figures[metric], 4)
            for metric in ("recall@1", "recall@5", "recall@10", "hit@10", "session_recall@10")
        }
        for lever, figures in levers.items()
    }


def _sweep_tunings(
    settings: Settings, sweep: Mapping[str, Sequence[float]]
) -> dict[str, RecallTuning]:
    base = Deployment(settings).recall_tuning()
    known = {f.name for f in fields(RecallTuning)}
    tunings = {}
    for name, values in sweep.items():
        if name not in known:
            raise InvalidInputError(f"cannot sweep {name!r}: choose from {sorted(known)}")
        kind = type(getattr(base, name))  # the reach is a count: 2, not 2.0
        for value in values:
            tunings[f"memstream {name}={value:g}"] = replace(base, **{name: kind(value)})
    return tunings


class _Scores:
    """RecallAtK per method and per group (all, a split, a category)."""

    def __init__(self) -> None:
        self._by: dict[tuple[str, str], RecallAtK] = {}

    def add(
        self,
        method: str,
        split: str,
        category: int,
        ranked: list[str],
        evidence: tuple[str, ...],
        sessions: Mapping[str, str],
    ) -> None:
        for group in ("all", split, f"category {category}"):
            self._by.setdefault((group, method), RecallAtK()).add(ranked, evidence, sessions)

    def figures(self, group: str) -> dict[str, dict[str, float]]:
        return {
            method: {**score.as_json(), "questions": score.questions}
            for (g, method), score in self._by.items()
            if g == group
        }


def _stored_vectors(ns: BenchNamespace, events: list[MessageRecorded], dims: int) -> np.ndarray:
    """The vectors the worker stored for `events`, in order: the vector baseline's documents."""
    pipe = ns.redis.pipeline(transaction=False)
    for event in events:
        memory = memories_of(event)[0]
        pipe.hget(ns.keys.memory(memory.tenant, memory.id), Fields.EMBEDDING)
    blobs = pipe.execute()
    return np.stack([vector_of(blob, dims) for blob in blobs])
