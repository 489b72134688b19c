"""Model providers behind the domain's protocols, chosen here, and only here, from settings:
`embedder_from_settings` picks the embedder by name, `chat_model` the configured chat API."""

from __future__ import annotations

from memstream.config import Settings
from memstream.errors import ConfigurationError
from memstream.llm import ModelClient
from memstream.memory.embeddings import Embedder

__all__ = ["chat_model", "embedder_from_settings", "embedding_model_id"]


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
