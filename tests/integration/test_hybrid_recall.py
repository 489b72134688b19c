"""Hybrid recall (BM25 + vector, fused) on the real stack: exact words, and isolation."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memstream import MessageRecorded
from memstream.memory.embeddings import Vectors
from memstream.memory.ranking.tokens import when_text
from memstream.memory.tenancy import tenant_token
from memstream.projections.recall import HybridQuery
from memstream.providers import embedder_from_settings
from memstream_bench.baselines import BM25

from .helpers import TestStack

pytestmark = pytest.mark.integration

# Each test here pins one lever of the ranking (fusion, duplicates, BM25, dates), so thread
# neighbours are off: memories said next to a hit would borrow from it (their own tests are
# in tests/unit/test_neighbours.py and the backend contract).

TARGET = "Invoice 58213 covers the March hosting bill."
# Near-identical siblings: only the number (and month) tells them apart.
SIBLINGS = [
    f"Invoice {number} covers the {month} hosting bill."
    for number, month in [
        (58214, "April"),
        (58212, "May"),
        (58215, "June"),
        (58216, "July"),
        (58211, "August"),
        (58217, "September"),
    ]
]


def record(stack: TestStack, tenant: str, contents: list[str]) -> None:
    events = [stack.turn(tenant, text, "Noted.", turn=i) for i, text in enumerate(contents)]
    stack.publish(events)
    stack.wait_applied(events)


def test_hybrid_ranks_the_exact_number_first_among_near_identical_siblings(
    stack: TestStack,
) -> None:
    tenant = f"inv-{uuid.uuid4().hex[:6]}"
    record(stack, tenant, [TARGET, *SIBLINGS])

    hybrid = stack.recaller(neighbour_share=0.0).recall(tenant, "58213", k=3)

    assert hybrid[0].memory.content == TARGET
    # First by words (1 of the lexical part) and close in meaning: well above any sibling,
    # which only the meaning part scores.
    assert 0.5 < hybrid[0].score <= 1.0
    assert hybrid[1].score < hybrid[0].score - 0.1
    assert [h.score for h in hybrid] == sorted((h.score for h in hybrid), reverse=True)


def test_restated_memories_take_one_slot_but_differing_facts_keep_theirs(
    stack: TestStack,
) -> None:
    tenant = f"dup-{uuid.uuid4().hex[:6]}"
    contents = [
        "crate 4 holds pears",
        "crate 7 holds pears",
        "Crate 4 holds pears.",  # the same after normalisation
        "The crate 4 holds pears",  # near-identical meaning, same number
        "Crate 4 holds apples.",
    ]
    events = [stack.turn(tenant, text, f"Noted {i}.", turn=i) for i, text in enumerate(contents)]
    stack.publish(events)
    stack.wait_applied(events)

    hits = stack.recaller(neighbour_share=0.0).recall(tenant, "which crate holds pears?", k=10)

    recalled = [h.memory.content for h in hits]
    pears_in_4 = [c for c in recalled if "4" in c and "pears" in c]
    assert len(pears_in_4) == 1, recalled
    assert "crate 7 holds pears" in recalled
    assert "Crate 4 holds apples." in recalled
    # Collapsed at recall only: the projection still holds every memory (query and answer).
    assert stack.stored_memories(tenant) == 2 * len(contents)


@pytest.mark.parametrize(
    "text",
    [
        "@tenant_tag:{*}",
        "* | -x",
        "invoice) | (@tenant_tag:{OTHER}",
        '"covers" {bill} [hosting] ~58213 %march%',
        "to be or not",  # stopwords only: vector recall alone
        "Rechnung für März, 東京 ✓",
    ],
)
def test_hostile_query_text_never_crosses_tenants(stack: TestStack, text: str) -> None:
    mine, other = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("mine", "other"))
    record(stack, mine, ["My hosting bill is paid."])
    record(stack, other, [TARGET, *SIBLINGS[:2]])
    text = text.replace("OTHER", tenant_token(other))

    hits = stack.recaller(neighbour_share=0.0).recall(mine, text, k=20)

    assert hits, "the tenant's own memories are still recalled"
    assert {h.memory.tenant for h in hits} == {mine}


def test_a_memory_is_found_by_the_words_of_its_date(stack: TestStack) -> None:
    tenant = f"when-{uuid.uuid4().hex[:6]}"
    days = [
        (3, "We went to the cinema."),
        (7, "We went hiking in the hills."),
        (12, "We painted the fence."),
        (21, "We cooked."),
        (28, "We read all day."),
    ]
    events = [
        replace(
            stack.turn(tenant, text, "Nice.", turn=i),
            recorded_at=datetime(2023, 5, day, tzinfo=UTC),
        )
        for i, (day, text) in enumerate(days)
    ]
    stack.publish(events)
    stack.wait_applied(events)

    hits = stack.recaller(neighbour_share=0.0).recall(tenant, "What did we do on 7 May 2023?", k=10)

    # The five "Nice." answers have the same vector: only their dates can order them.
    replies = [h.memory.timestamp.day for h in hits if h.memory.content == "Nice."]
    assert replies[0] == 7, replies
    assert [h.memory.timestamp.day for h in hits[:2]].count(7) >= 1


def test_the_lexical_list_scores_bm25_over_the_tenants_own_memories(stack: TestStack) -> None:
    # In `mine`, "Caroline" is in every memory and "pottery" in one; another tenant of the same
    # index fills it with "pottery" and never says "Caroline". Index-wide statistics would make
    # "caroline" the rare, decisive word; the tenant's own make it "pottery".
    mine, other = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("bm25", "noise"))
    texts = [
        "Caroline: Caroline and Caroline went out",
        "Caroline: I tried pottery once",
        "Caroline: the weather was grey",
        "Caroline: Caroline read a book",
    ]
    noise = [f"pottery class number {i} made pottery bowls" for i in range(30)]
    events = [
        MessageRecorded(
            tenant=tenant,
            thread="t",
            source_id=f"{tenant}-{i}",
            content=text,
            speaker="",
            recorded_at=datetime(2024, 1, 1, tzinfo=UTC),
            importance=0.5,
            embedding_model=stack.model_id,
        )
        for tenant, contents in ((mine, texts), (other, noise))
        for i, text in enumerate(contents)
    ]
    stack.publish(events)
    stack.wait_applied(events)
    question = "Did Caroline try pottery?"
    recaller = stack.recaller(neighbour_share=0.0)
    words_only = replace(recaller.tuning, vector_weight=0.0)

    hits = recaller.search(
        HybridQuery(mine, question, _query_vector(stack, question), k=4), words_only
    )

    # The reference: Okapi BM25 over this tenant's memories alone (plus their date words,
    # which recall scores too and which the question does not name).
    reference = BM25([f"{t} {when_text(datetime(2024, 1, 1, tzinfo=UTC))}" for t in texts])
    expected = [texts[i] for i in reference.rank(question, 4)]
    assert [h.memory.content for h in hits] == expected
    assert hits[0].memory.content == "Caroline: I tried pottery once"
    assert hits[0].score == 1.0  # the best words among the candidates, with no vector weight


def _query_vector(stack: TestStack, text: str) -> Vectors:
    return embedder_from_settings(stack.settings).embed_query(text)
