"""How the offline encoder groups a batch's texts into runs (providers/onnx_encoder.py): each
run is padded to its longest text, so runs hold texts of similar length; the runs are spread
over the encoder's threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstream.providers import onnx_encoder
from memstream.providers.bge import BgeSmallEmbedder
from memstream.providers.onnx_encoder import _BATCH, _SLACK, _shares, _similar_lengths


@given(st.lists(st.text(max_size=300), max_size=200))
def test_every_text_is_in_one_run_shortest_first_and_padding_is_bounded(texts: list[str]) -> None:
    runs = list(_similar_lengths(texts))
    rows = [row for run in runs for row in run]
    assert sorted(rows) == list(range(len(texts)))
    assert [len(texts[r]) for r in rows] == sorted(len(t) for t in texts)
    for run in runs:
        assert 1 <= len(run) <= _BATCH
        sizes = [max(len(texts[r]), 1) for r in run]
        # Padded to its longest, a run of more than one text wastes at most _SLACK of it.
        assert len(run) == 1 or len(run) * max(sizes) <= _SLACK * sum(sizes)


def test_a_small_batch_of_mixed_lengths_is_not_padded_to_its_longest() -> None:
    texts = ["ok", "fine", "sure", "a" * 400, "yes", "b" * 380, "no"]
    runs = list(_similar_lengths(texts))
    assert runs == [[0, 6], [4, 1, 2], [5, 3]]  # ties keep their order


def test_texts_of_one_length_go_in_runs_of_the_batch_size() -> None:
    runs = list(_similar_lengths(["same"] * (2 * _BATCH + 1)))
    assert [len(run) for run in runs] == [_BATCH, _BATCH, 1]


@given(st.lists(st.text(max_size=300), max_size=60), st.integers(1, 4))
def test_a_batch_is_split_into_a_run_for_each_thread_while_it_has_texts_to_split(
    texts: list[str], workers: int
) -> None:
    before = list(_similar_lengths(texts))
    runs = _shares([list(run) for run in before], workers)
    assert sorted(row for run in runs for row in run) == list(range(len(texts)))
    assert all(runs)
    assert len(runs) >= min(workers, len(texts))
    if len(before) >= workers:  # enough runs already: none is split
        assert runs == before


def test_a_few_texts_of_one_length_are_halved_not_left_on_one_thread() -> None:
    assert _shares([[0, 1, 2, 3, 4]], 2) == [[0, 1], [2, 3, 4]]
    assert _shares([[0, 1, 2, 3]], 4) == [[0], [1], [2], [3]]
    assert _shares([[7]], 2) == [[7]]


@pytest.fixture(scope="module")
def embedder() -> BgeSmallEmbedder:
    return BgeSmallEmbedder(threads=2)


def test_a_batch_runs_on_the_encoders_threads_at_once_with_the_vectors_of_one_thread(
    embedder: BgeSmallEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [f"note {i}: " + "word " * (i % 40) for i in range(120)]
    assert len(list(_similar_lengths(texts))) >= 2  # several runs: none is split
    one_thread = BgeSmallEmbedder(threads=1).embed_documents(texts)
    encoder = embedder._encoder
    embed, names, guard = encoder._embed, set[str](), threading.Lock()
    both_in = threading.Barrier(2, timeout=30)

    def watched(chunk: list[str]) -> np.ndarray:
        name = threading.current_thread().name
        with guard:
            first = name not in names
            names.add(name)
        if first:  # each thread's first run waits for the other's: breaks unless they overlap
            both_in.wait()
        return embed(chunk)

    monkeypatch.setattr(encoder, "_embed", watched)
    spread = embedder.embed_documents(texts)
    assert np.array_equal(spread, one_thread)  # the same runs give the same vectors
    assert len(names) == 2  # the caller's thread and the encoder's helper
    assert threading.current_thread().name in names


def test_vectors_come_back_in_the_order_of_the_texts_whatever_the_runs(
    embedder: BgeSmallEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = ["The deploy is on Thursday.", "x" * 300, "hi", "We use PostgreSQL 16 in prod."]
    alone = np.stack([embedder.embed_documents([text])[0] for text in texts])
    for slack in (_SLACK, 1e9):  # runs of similar lengths; one run padded to the longest
        monkeypatch.setattr(onnx_encoder, "_SLACK", slack)
        together = embedder.embed_documents(texts)
        # The int8 model quantizes each run's activations by their own range, so a text's
        # vector moves a little with its company (cosine > 0.98), never to another text's.
        similar = together @ alone.T
        assert list(similar.argmax(axis=1)) == list(range(len(texts)))
        assert np.diag(similar).min() > 0.98
