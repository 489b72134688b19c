"""Sentence embeddings from a local ONNX transformer: tokenise, run on the CPU, pool, unit length.

The local embedders (`minilm`, `bge`, `onnx`) differ only in where their files come from and
how they pool the last hidden state; this module owns everything else, once.
"""

from __future__ import annotations

import enum
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
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
        # One session, each call on one thread: a batch's runs are spread over `threads`
        # threads calling it at once (its caller's and helpers), a query runs on its
        # caller's. Splitting each operator across threads instead (onnxruntime's intra-op
        # pool) makes the threads meet at every operator, so one preempted thread stalls the
        # other, and a query's small operators cost more in hand-offs than they save.
        # Measured with bge-small on 2 cores (docs/benchmarks.md, issue 37): 1,024 texts at
        # 571-576 texts/s against 434-438, 4 texts 3.8 ms of CPU a text against 6.0; one
        # query's recall p50 10.1 ms on one thread against 15.9 ms on two.
        self._session = cpu_session(onnxruntime, model, 1)
        self._threads = threads or min(4, os.cpu_count() or 1)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        # A model of the `onnx` embedder may be any export: feed only the inputs it declares
        # (not every one takes token_type_ids), and say at once when it is no encoder.
        self._inputs = {i.name for i in self._session.get_inputs()}
        outputs = [o.name for o in self._session.get_outputs()]
        if "last_hidden_state" not in outputs:
            raise ConfigurationError(
                f"{model} has no last_hidden_state output (it has {', '.join(outputs)}): use "
                "an ONNX export of the sentence encoder's transformer (a feature-extraction "
                "export names its token vectors so)"
            )
        # None: the width of the model's output, read off one embedding (a few milliseconds).
        self.dims = dims or self._embed(["dims"]).shape[1]

    def embed_many(self, texts: Sequence[str]) -> Vectors:
        out = np.empty((len(texts), self.dims), dtype=np.float32)
        runs = _shares(list(_similar_lengths(texts)), self._threads)

        def fill(rows: list[int]) -> None:
            out[rows] = self._embed([texts[i] for i in rows])

        if len(runs) < 2:
            for rows in runs:
                fill(rows)
            return out
        # The costliest runs first, so that the last to finish are short ones and no thread
        # idles long while another ends a big run. The caller takes runs too: it would only
        # wait, and one hand-off less is ~1 ms less on a batch of a few texts.
        runs.sort(key=lambda rows: len(rows) * max(len(texts[i]) for i in rows), reverse=True)
        queue, taking = iter(runs), threading.Lock()

        def take() -> None:
            while True:
                with taking:
                    rows = next(queue, None)
                if rows is None:
                    return
                fill(rows)

        helping = [self._helpers().submit(take) for _ in range(min(self._threads, len(runs)) - 1)]
        take()
        for helper in helping:
            helper.result()
        return out

    def embed_one(self, text: str) -> Vectors:
        vector: Vectors = self._embed([text])[0]
        return vector

    def _helpers(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._threads - 1, thread_name_prefix="encoder")
            return self._pool

    def _embed(self, texts: list[str]) -> Vectors:
        with self._tokenize_lock:
            encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run(
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


def _shares(runs: list[list[int]], workers: int) -> list[list[int]]:
    """`runs`, the longest halved until there is one for each of `workers` threads (while a
    run has two texts to split): a batch of a few texts of one length is one run, and would
    leave every thread but one idle."""
    while 0 < len(runs) < workers:
        longest = max(range(len(runs)), key=lambda i: len(runs[i]))
        run = runs[longest]
        if len(run) < 2:
            break
        runs[longest : longest + 1] = [run[: len(run) // 2], run[len(run) // 2 :]]
    return runs


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
