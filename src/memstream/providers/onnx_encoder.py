"""Sentence embeddings from a local ONNX transformer: tokenise, run on the CPU, pool, unit length.

The local embedders (`minilm`, `bge`, `onnx`) differ only in where their files come from and
how they pool the last hidden state; this module owns everything else, once.
"""

from __future__ import annotations

import enum
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memstream.errors import ConfigurationError
from memstream.memory.embeddings import Vectors

__all__ = ["EncoderEmbedder", "OnnxSentenceEncoder", "Pooling", "cpu_session"]

_BATCH = 32
_SLACK = 1.25


class Pooling(enum.Enum):
    """How token vectors become one sentence vector; each model is trained for one."""

    MEAN = "mean"  # average of the unmasked tokens (sentence-transformers' MiniLM)
    CLS = "cls"  # the first ([CLS]) token (BGE)


class OnnxSentenceEncoder:
    """One ONNX sentence encoder on onnxruntime's CPU provider; vectors are unit length."""

    def __init__(
        self,
        *,
        model: Path,
        tokenizer_json: str,
        dims: int | None,
        pooling: Pooling,
        max_tokens: int,
        threads: int | None = None,
    ) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigurationError(
                f"the offline embedders need {exc.name}: run `bash infra/install.sh` "
                "(or pip install memstream) in this environment"
            ) from exc
        self._pooling = pooling
        self._tokenizer = Tokenizer.from_str(tokenizer_json)
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.enable_padding()
        # encode_batch is not safe to call from two threads while padding is enabled.
        self._tokenize_lock = threading.Lock()
        batch_threads = threads or min(4, os.cpu_count() or 1)
        self._batch_session = cpu_session(onnxruntime, model, batch_threads)
        # One query is a few milliseconds of small operators: splitting each across threads
        # costs more in hand-offs than it saves, and on busy cores a woken thread may wait its
        # turn. Measured with bge-small on 2 loaded cores (bench recall, 100k memories):
        # end-to-end recall p50 / p95 15.9 / 25.7 ms with 2 threads, 10.1 / 17.0 ms with one.
        # Batches of passages do gain from more threads.
        self._query_session = (
            self._batch_session if batch_threads == 1 else cpu_session(onnxruntime, model, 1)
        )
        # A model of the `onnx` embedder may be any export: feed only the inputs it declares
        # (not every one takes token_type_ids), and say at once when it is no encoder.
        self._inputs = {i.name for i in self._batch_session.get_inputs()}
        outputs = [o.name for o in self._batch_session.get_outputs()]
        if "last_hidden_state" not in outputs:
            raise ConfigurationError(
                f"{model} has no last_hidden_state output (it has {', '.join(outputs)}): use "
                "an ONNX export of the sentence encoder's transformer (a feature-extraction "
                "export names its token vectors so)"
            )
        # None: the width of the model's output, read off one embedding (a few milliseconds).
        self.dims = dims or self._embed(["dims"], self._query_session).shape[1]

    def embed_many(self, texts: Sequence[str]) -> Vectors:
        out = np.empty((len(texts), self.dims), dtype=np.float32)
        for rows in _similar_lengths(texts):
            out[rows] = self._embed([texts[i] for i in rows], self._batch_session)
        return out

    def embed_one(self, text: str) -> Vectors:
        vector: Vectors = self._embed([text], self._query_session)[0]
        return vector

    def _embed(self, texts: list[str], session: Any) -> Vectors:
        with self._tokenize_lock:
            encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = session.run(
            ["last_hidden_state"], {k: v for k, v in feeds.items() if k in self._inputs}
        )
        if self._pooling is Pooling.CLS:
            pooled = hidden[:, 0, :]
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Vectors = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit


def _similar_lengths(texts: Sequence[str]) -> Iterator[list[int]]:
    """`texts`' rows in runs for the encoder, shortest first: each run is padded to its longest
    text, so a run ends at `_BATCH` texts or where the next text would make the padding more
    than `_SLACK` of the run's characters (by characters: tokens are not known yet). Sorted
    runs pad ~2x less on conversational text than runs in arrival order; a small batch of
    mixed lengths in one run paid up to 40 % more a text (docs/benchmarks.md, issue 37)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    run: list[int] = []
    total = 0
    for row in order:
        size = max(len(texts[row]), 1)
        # Sorted, so the newcomer is the run's longest: the run would be padded to it.
        if run and (len(run) >= _BATCH or (len(run) + 1) * size > _SLACK * (total + size)):
            yield run
            run, total = [], 0
        run.append(row)
        total += size
    if run:
        yield run


def cpu_session(onnxruntime: Any, model: Path, threads: int) -> Any:
    """An inference session of `model` on the CPU provider with `threads` threads that do not
    spin: the embedders' and the reranker's."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    # No busy-waiting between operators: the embedder shares its cores with Kafka, Redis and
    # the worker, and spinning threads starve them. Measured with bge-small on 2 loaded
    # cores: a query's p50 22-27 ms spinning, 9-13 ms not; passages/s 30 against 57.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


class EncoderEmbedder:
    """An embedder that is one `OnnxSentenceEncoder` under its model id: what the local
    providers make, each choosing only the files, the pooling and the id."""

    def __init__(self, model_id: str, encoder: OnnxSentenceEncoder) -> None:
        self._model_id = model_id
        self._encoder = encoder
        self.dims = encoder.dims

    @property
    def model_id(self) -> str:
        return self._model_id

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._encoder.embed_many(texts)

    def embed_query(self, text: str) -> Vectors:
        return self._encoder.embed_one(text)
