"""MEMSTREAM_EMBEDDER=onnx: any ONNX sentence encoder, its files pinned by the user.

MEMSTREAM_EMBEDDER_FILES pins the files (the ONNX model first, its `tokenizer.json` among
them), MEMSTREAM_EMBEDDER_SOURCE says where they are (a folder, or a hub revision downloaded
once: `model_files`), MEMSTREAM_EMBEDDER_POOLING and _MAX_TOKENS how it reads a text; the
width of its vectors is read off the model. The model id is worked out from these settings
alone, nothing read or downloaded: `onnx@<model sha256[:12]>+<8 hex digits>`, the latter a
digest of everything else that shapes the vectors (the other pins, the pooling, the token
limit), so two configurations that could embed differently never share an id.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import PurePosixPath

from memstream.config import Settings
from memstream.errors import ConfigurationError
from memstream.providers import EmbedderProvider, embedder_source
from memstream.providers.model_files import ModelFiles, ModelSource
from memstream.providers.onnx_encoder import EncoderEmbedder, OnnxSentenceEncoder, Pooling

__all__ = ["PROVIDER", "OnnxEmbedder", "OnnxModel"]

_FILES = "MEMSTREAM_EMBEDDER_FILES"
_TOKENIZER = "tokenizer.json"


@dataclass(frozen=True, slots=True)
class OnnxModel:
    """The model the settings configure, named without reading a file."""

    files: ModelFiles  # the ONNX model first
    tokenizer: str  # the pinned tokenizer.json
    pooling: Pooling
    max_tokens: int

    @classmethod
    def from_settings(cls, settings: Settings) -> OnnxModel:
        if not settings.embedder_files:
            raise ConfigurationError(
                f"MEMSTREAM_EMBEDDER=onnx needs {_FILES}: the model's files pinned as "
                "NAME=SHA256, comma-separated, the ONNX model first and its tokenizer.json "
                "among them (`sha256sum FILE` prints a digest)"
            )
        files = ModelFiles.parse(settings.embedder_files, setting=_FILES)
        tokenizers = [n for n in files.names[1:] if PurePosixPath(n).name == _TOKENIZER]
        if len(tokenizers) != 1:
            raise ConfigurationError(
                f"{_FILES} must pin one {_TOKENIZER} after the ONNX model; it pins "
                f"{', '.join(files.names)}"
            )
        return cls(
            files, tokenizers[0], Pooling(settings.embedder_pooling), settings.embedder_max_tokens
        )

    @property
    def onnx(self) -> str:
        return self.files.names[0]

    @property
    def model_id(self) -> str:
        (_, model_digest), *others = self.files.pins
        shape = [f"{name}={digest}" for name, digest in others]
        shape += [self.pooling.value, str(self.max_tokens)]
        setup = hashlib.sha256(";".join(shape).encode()).hexdigest()
        return f"onnx@{model_digest[:12]}+{setup[:8]}"


class OnnxEmbedder(EncoderEmbedder):
    """A pinned ONNX sentence encoder on onnxruntime's CPU; vectors are unit length."""

    def __init__(self, model: OnnxModel, source: ModelSource, threads: int | None = None) -> None:
        folder = source.folder(model.files)
        encoder = OnnxSentenceEncoder(
            model=folder / model.onnx,
            tokenizer_json=(folder / model.tokenizer).read_text(encoding="utf-8"),
            dims=None,
            pooling=model.pooling,
            max_tokens=model.max_tokens,
            threads=threads,
        )
        super().__init__(model.model_id, encoder)


def _configured(settings: Settings) -> OnnxEmbedder:
    model = OnnxModel.from_settings(settings)
    source = embedder_source(settings)
    if source is None:
        raise ConfigurationError(
            "MEMSTREAM_EMBEDDER=onnx needs MEMSTREAM_EMBEDDER_SOURCE: the folder holding the "
            f"files {_FILES} pins, or hf://OWNER/REPO@COMMIT[/FOLDER]"
        )
    return OnnxEmbedder(model, source)


def _for_model(model_id: str, settings: Settings) -> OnnxEmbedder | None:
    # Only the configured model: its files are named by these settings and no others.
    if settings.embedder != "onnx" or model_id != OnnxModel.from_settings(settings).model_id:
        return None
    return _configured(settings)


PROVIDER = EmbedderProvider(
    model_id=lambda settings: OnnxModel.from_settings(settings).model_id,
    configured=_configured,
    for_model=_for_model,
)
