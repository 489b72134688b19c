"""The reranker lever (`memory.ranking.rerank`): the best few read again with the query, and the
cross-encoder that does it offline (`providers.rerankers`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import ConfigurationError
from memstream.memory.model import Memory, MemoryType
from memstream.memory.ranking.fusion import Candidate
from memstream.memory.ranking.neighbours import neighbours_in
from memstream.memory.ranking.rank import TermStats, rank
from memstream.memory.ranking.rerank import rerank
from memstream.memory.ranking.tokens import memory_words, query_terms
from memstream.providers.rerankers import MS_MARCO_FILES, reranker_from_settings

AT = datetime(2024, 5, 8, tzinfo=UTC)


def _candidate(name: str) -> Candidate:
    memory = Memory(name, "acme", name, MemoryType.CONVERSATION, "t", AT, 0.5, "e")
    return Candidate(memory, 0.0, 0.0, np.zeros(2, dtype=np.float32))


class Told:
    """A reranker that says what it was told of each text, and counts what it read."""

    model_id = "told"

    def __init__(self, relevance: dict[str, float]) -> None:
        self._relevance = relevance
        self.read: list[list[str]] = []

    def relevance(self, query: str, texts: Sequence[str]) -> Sequence[float]:
        self.read.append(list(texts))
        return [self._relevance[t] for t in texts]


RANKED = [(_candidate(n), s) for n, s in (("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6))]


def test_the_top_is_ordered_by_relevance_and_each_place_keeps_its_score() -> None:
    told = Told({"a": 0.1, "b": 0.9, "c": 0.5})
    got = rerank(RANKED, "q", told, 3)
    # d, below the depth, is not read and keeps its place.
    assert [(c.memory.id, s) for c, s in got] == [("b", 0.9), ("c", 0.8), ("a", 0.7), ("d", 0.6)]
    assert told.read == [["a", "b", "c"]]


def test_a_tie_keeps_the_first_ranking_order() -> None:
    told = Told({"a": 0.5, "b": 0.9, "c": 0.5})
    assert [c.memory.id for c, _ in rerank(RANKED, "q", told, 3)] == ["b", "a", "c", "d"]


def test_an_answer_is_read_after_the_question_it_answered() -> None:
    told = Told({"a": 0.0, "Who approves refunds? b": 1.0, "c": 0.0})
    question = _candidate("Who approves refunds?").memory
    got = rerank(RANKED, "refunds", told, 3, {"b": question})
    assert told.read == [["a", "Who approves refunds? b", "c"]]
    assert [c.memory.id for c, _ in got][:2] == ["b", "a"]


@pytest.mark.parametrize(("query", "depth"), [("", 3), ("  ", 3), ("q", 1), ("q", 0)])
def test_nothing_is_read_again_without_a_query_or_two_to_order(query: str, depth: int) -> None:
    told = Told({"a": 0.0, "b": 1.0, "c": 1.0})
    assert rerank(RANKED, query, told, depth) == RANKED
    assert told.read == []
    assert rerank(RANKED, "q", None, 3) == RANKED


# A hand-made conversation: the words of "Where did Caroline move from?" are in a request
# about a couch; the answer shares only her name. Words and meaning rank the couch first.
TEXTS = (
    "Caroline: Help me move the couch away from the window, Melanie.",
    "Caroline: I grew up in Sweden and came here four years ago.",
    "Melanie: We went camping at the lake last weekend.",
    "Melanie: The kids painted the fence blue.",
)
QUERY = "Where did Caroline move from?"


def _ranked(deployment: Deployment, k: int, **tuning: object) -> list[str]:
    memories = [
        Memory(
            f"m{i}",
            "acme",
            t,
            MemoryType.CONVERSATION,
            f"t{i}",
            AT + timedelta(minutes=i),
            0.5,
            "e",
        )
        for i, t in enumerate(TEXTS)
    ]
    embedder = deployment.embedder
    terms = query_terms(QUERY)
    stats = TermStats(4, tuple(sum(t in memory_words(m) for m in memories) for t in terms))
    got = rank(
        memories,
        embedder.embed_documents(list(TEXTS)),
        embedder.embed_query(QUERY),
        terms,
        stats,
        replace(deployment.recall_tuning(), **tuning),  # type: ignore[arg-type]
        k,
        text=QUERY,
    )
    return [hit.memory.id for hit in got]


def test_the_reranker_puts_the_answer_first_where_words_and_meaning_did_not() -> None:
    deployment = Deployment(Settings())
    assert deployment.reranker is not None  # on by default, from its package
    assert _ranked(deployment, 4, rerank_depth=0)[0] == "m0"
    assert _ranked(deployment, 4)[:2] == ["m1", "m0"]
    assert _ranked(deployment, 1) == ["m1"]  # the first hit does not depend on k


def test_the_cross_encoder_scores_an_answer_above_a_text_that_only_shares_words() -> None:
    reranker = Deployment(Settings()).reranker
    assert reranker is not None
    assert reranker.model_id.endswith(MS_MARCO_FILES.pins[0][1][:12])
    couch, sweden, camping, _ = reranker.relevance(QUERY, TEXTS)
    assert sweden > 0.9 and couch < 0.5 and camping < 0.01
    assert reranker.relevance(QUERY, []) == []
    assert reranker_from_settings(Settings()) is reranker  # loaded once a process


def test_the_reranker_is_chosen_by_name_and_none_turns_it_off(tmp_path: Path) -> None:
    assert reranker_from_settings(Settings(reranker="none")) is None
    assert Deployment(Settings(recall_rerank_depth=0)).reranker is None
    with pytest.raises(ConfigurationError, match="'ms-marco-minilm-l12-int8', 'none'"):
        reranker_from_settings(Settings(reranker="bogus"))
    with pytest.raises(ConfigurationError, match=r"lacks model\.onnx, tokenizer\.json"):
        reranker_from_settings(Settings(reranker_source=str(tmp_path)))


def test_a_report_names_the_reranker_by_its_model() -> None:
    tuning = Deployment(Settings()).recall_tuning()
    described = tuning.described()
    assert tuning.reranker is not None and described["reranker"] == tuning.reranker.model_id
    assert described["rerank_depth"] == 5
    assert json.loads(json.dumps(described)) == described


def test_an_answer_keeps_its_question_s_place_when_the_query_only_names_the_topic() -> None:
    # "staging banner" matches the question's words; its reply, "Orange.", shares none. The
    # answer takes the question's place (ranking.questions); read with its question, the
    # reranker keeps it there, where "Orange." alone would read as answering nothing.
    deployment = Deployment(Settings())
    embedder = deployment.embedder
    said = [
        ("What colour is the staging banner?", "user", "e1"),
        ("Orange.", "assistant", "e1"),
        ("The production banner stays blue until the launch.", "user", "e2"),
        ("Noted, blue for production.", "assistant", "e2"),
    ]
    memories = [
        Memory(f"m{i}", "acme", text, MemoryType.CONVERSATION, "t", AT + timedelta(minutes=i // 2),
               0.5, event, role=role)
        for i, (text, role, event) in enumerate(said)
    ]  # fmt: skip
    vectors = embedder.embed_documents([m.content for m in memories])
    query = "staging banner"
    terms = query_terms(query)
    stats = TermStats(4, tuple(sum(t in memory_words(m) for m in memories) for t in terms))

    def ranked(depth: int) -> list[str]:
        got = rank(
            memories,
            vectors,
            embedder.embed_query(query),
            terms,
            stats,
            replace(deployment.recall_tuning(), rerank_depth=depth),
            2,
            lambda hits, reach: neighbours_in(zip(memories, vectors, strict=True), hits, reach),
            text=query,
        )
        return [hit.memory.content for hit in got]

    assert ranked(0)[0] == ranked(5)[0] == "Orange."
    reranker = deployment.reranker
    assert reranker is not None  # "Orange." alone reads as no answer at all
    alone, asked = reranker.relevance(query, ["Orange.", "What colour is the staging banner?"])
    assert alone < 0.01 < asked
