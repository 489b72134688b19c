"""Model providers behind the domain's protocols, chosen here, and only here, from settings:
`embedder_from_settings` picks the embedder by name, `EmbedderCatalogue` finds the embedder of
a model the projection was built with, `chat_model` the configured chat API."""

from __future__ import annotations

import threading

from memstream.config import Settings
from memstream.errors import ConfigurationError
from memstream.llm import ModelClient
from memstream.memory.embeddings import Embedder

__all__ = ["EmbedderCatalogue", "chat_model", "embedder_from_settings", "embedding_model_id"]


def embedding_model_id(settings: Settings) -> str:
    """The model id events are recorded for, without loading the model or calling a server."""
    if settings.embedder == "bge-small-int8":
        from memstream.providers.bge import BGE_MODEL_ID

        return BGE_MODEL_ID
    if settings.embedder == "minilm-int8":
        from memstream.providers.minilm import minilm_model_id

        return minilm_model_id()
    if settings.embedder == "openai":
        from memstream.providers.openai_compatible import openai_model_id

        return openai_model_id(settings.embedding_model)
    raise _unknown_embedder(settings)


def embedder_from_settings(settings: Settings) -> Embedder:
    if settings.embedder == "bge-small-int8":
        from memstream.providers.bge import BgeSmallEmbedder

        return BgeSmallEmbedder()
    if settings.embedder == "minilm-int8":
        from memstream.providers.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if settings.embedder == "openai":
        from memstream.providers.openai_compatible import OpenAICompatibleEmbedder

        return OpenAICompatibleEmbedder(
            settings.embedding_base_url,
            settings.embedding_model,
            api_key=settings.embedding_api_key,
            dims=settings.embedding_dims,
        )
    raise _unknown_embedder(settings)


class EmbedderCatalogue:
    """The `Embedders` of a process: the configured embedder (or the one it was given), the
    offline models that ship in a package (whatever the settings name), and other models of
    the configured OpenAI-compatible endpoint. Each is loaded once, on first use."""

    def __init__(self, settings: Settings, configured: Embedder | None = None) -> None:
        self._settings = settings
        self._given = configured
        self._loaded: dict[str, Embedder] = {}
        self._lock = threading.Lock()

    @property
    def configured_model(self) -> str:
        if self._given is not None:
            return self._given.model_id
        return embedding_model_id(self._settings)

    def configured(self) -> Embedder:
        return self.for_model(self.configured_model)

    def for_model(self, model_id: str) -> Embedder:
        with self._lock:  # recall threads and the worker's loop may ask at once
            if model_id not in self._loaded:
                self._loaded[model_id] = self._load(model_id)
            return self._loaded[model_id]

    def _load(self, model_id: str) -> Embedder:
        if self._given is not None and model_id == self._given.model_id:
            return self._given
        if model_id == embedding_model_id(self._settings):
            return embedder_from_settings(self._settings)
        from memstream.providers.bge import BGE_MODEL_ID, BgeSmallEmbedder
        from memstream.providers.minilm import MiniLMEmbedder, minilm_model_id
        from memstream.providers.openai_compatible import (
            OpenAICompatibleEmbedder,
            openai_model_id,
        )

        if model_id == BGE_MODEL_ID:
            return BgeSmallEmbedder()
        if model_id == minilm_model_id():
            return MiniLMEmbedder()
        settings = self._settings
        name = model_id.removeprefix(openai_model_id(""))
        if name != model_id and settings.embedding_base_url:
            return OpenAICompatibleEmbedder(
                settings.embedding_base_url, name, api_key=settings.embedding_api_key
            )
        raise ConfigurationError(
            f"the projection's vectors are of the model {model_id!r}, which this process "
            f"cannot make: it embeds with {self.configured_model!r} "
            f"(MEMSTREAM_EMBEDDER={settings.embedder!r}) and has no provider for that one. "
            "Either run it with that model's provider settings (MEMSTREAM_EMBEDDER, "
            "MEMSTREAM_EMBEDDING_BASE_URL, MEMSTREAM_EMBEDDING_MODEL), or rebuild the "
            f"projection for {self.configured_model!r} with `memstream replay` under these "
            "settings: the old generation serves until the new one is swapped in."
        )


def chat_model(settings: Settings) -> ModelClient | None:
    """The configured OpenAI-compatible chat model; None when none is (offline: each caller
    has its own stand-in, an echo for `memstream chat`, an extractive summary for the worker)."""
    if not settings.chat_base_url:
        return None
    from memstream.providers.openai_chat import OpenAICompatibleChat

    return OpenAICompatibleChat(
        settings.chat_base_url, settings.chat_model, api_key=settings.chat_api_key
    )


def _unknown_embedder(settings: Settings) -> ConfigurationError:
    return ConfigurationError(
        f"MEMSTREAM_EMBEDDER={settings.embedder!r} is not a known embedder; "
        "use 'bge-small-int8' (offline, the default), 'minilm-int8' (offline) or 'openai'"
    )
