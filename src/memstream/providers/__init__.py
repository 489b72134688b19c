"""Model providers behind the domain's protocols, chosen here, and only here, from settings:
`embedder_from_settings` picks the embedder by name, `EmbedderCatalogue` finds the embedder of
a model the projection was built with, `chat_model` the configured chat API."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

from memstream.config import Settings
from memstream.errors import ConfigurationError
from memstream.llm import ModelClient
from memstream.memory.embeddings import Embedder

if TYPE_CHECKING:
    from memstream.providers.model_files import ModelSource

__all__ = [
    "EMBEDDERS",
    "EmbedderCatalogue",
    "EmbedderProvider",
    "chat_model",
    "embedder_from_settings",
    "embedder_source",
    "embedding_model_id",
]


@dataclass(frozen=True, slots=True)
class EmbedderProvider:
    """One `MEMSTREAM_EMBEDDER` choice, each its module's `PROVIDER`: the model id its events
    carry (worked out without loading the model or calling a server), the embedder the settings
    configure, and the embedder of a model id a projection was built with, where this provider
    makes that model (None where it does not)."""

    model_id: Callable[[Settings], str]
    configured: Callable[[Settings], Embedder]
    for_model: Callable[[str, Settings], Embedder | None]


# MEMSTREAM_EMBEDDER's names -> the module whose PROVIDER each is, imported only when asked:
# a new embedder is its module and its line here (and its row in README's settings table).
EMBEDDERS: Mapping[str, str] = {
    "bge-small-int8": "memstream.providers.bge",
    "minilm-int8": "memstream.providers.minilm",
    "onnx": "memstream.providers.onnx",
    "openai": "memstream.providers.openai_compatible",
}


def _provider(name: str) -> EmbedderProvider:
    try:
        module = EMBEDDERS[name]
    except KeyError:
        raise ConfigurationError(
            f"MEMSTREAM_EMBEDDER={name!r} is not a known embedder; use one of "
            f"{', '.join(repr(n) for n in EMBEDDERS)} (README's settings table says what each is)"
        ) from None
    provider: EmbedderProvider = import_module(module).PROVIDER
    return provider


def embedding_model_id(settings: Settings) -> str:
    """The model id events are recorded for, without loading the model or calling a server."""
    return _provider(settings.embedder).model_id(settings)


def embedder_from_settings(settings: Settings) -> Embedder:
    return _provider(settings.embedder).configured(settings)


def embedder_source(settings: Settings) -> ModelSource | None:
    """Where the configured embedder's files come from, MEMSTREAM_EMBEDDER_SOURCE (a folder or
    a hub revision); None where it names none (a packaged model's default). Reads no file."""
    if not settings.embedder_source:
        return None
    # Imported when a source is named: it brings httpx, which most commands never use.
    from memstream.providers.model_files import model_source

    return model_source(settings.embedder_source, setting="MEMSTREAM_EMBEDDER_SOURCE")


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
        for name in EMBEDDERS:
            made = _provider(name).for_model(model_id, self._settings)
            if made is not None:
                return made
        settings = self._settings
        raise ConfigurationError(
            f"the projection's vectors are of the model {model_id!r}, which this process "
            f"cannot make: it embeds with {self.configured_model!r} "
            f"(MEMSTREAM_EMBEDDER={settings.embedder!r}) and has no provider for that one. "
            "Either run it with that model's provider settings (MEMSTREAM_EMBEDDER, and "
            "MEMSTREAM_EMBEDDING_BASE_URL and _MODEL for an endpoint's model, "
            "MEMSTREAM_EMBEDDER_SOURCE and _FILES for an onnx one), or rebuild the "
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
        settings.chat_base_url,
        settings.chat_model,
        api_key=settings.chat_api_key,
        timeout=settings.chat_timeout_s,
        json_mode=settings.chat_json_mode,
    )
