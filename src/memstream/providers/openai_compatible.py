"""Embeddings from any OpenAI-compatible HTTP API (OpenAI, Ollama's /v1, vLLM, LiteLLM...).

Configured by MEMSTREAM_EMBEDDING_BASE_URL, MEMSTREAM_EMBEDDING_MODEL and, where the server
wants one, MEMSTREAM_EMBEDDING_API_KEY. Retries as `httpjson.post_json` does; every failure
surfaces as EmbeddingProviderError saying what the server answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from memstream.config import Settings
from memstream.errors import ConfigurationError, EmbeddingProviderError
from memstream.memory.embeddings import Vectors
from memstream.providers import EmbedderProvider
from memstream.providers.httpjson import post_json

__all__ = ["PROVIDER", "OpenAICompatibleEmbedder", "openai_model_id"]

_BATCH = 128


def openai_model_id(model: str) -> str:
    return f"openai-compatible:{model}"


class OpenAICompatibleEmbedder:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "",
        dims: int = 0,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url or not model:
            raise ConfigurationError(
                "MEMSTREAM_EMBEDDER=openai needs MEMSTREAM_EMBEDDING_BASE_URL (e.g. "
                "http://127.0.0.1:11434/v1) and MEMSTREAM_EMBEDDING_MODEL"
            )
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )
        self._model = model
        self._dims = dims or int(self._request(["dimension probe"]).shape[1])

    @property
    def model_id(self) -> str:
        return openai_model_id(self._model)

    @property
    def dims(self) -> int:
        return self._dims

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.empty((0, self._dims), dtype=np.float32)
        return np.concatenate(
            [self._request(list(texts[i : i + _BATCH])) for i in range(0, len(texts), _BATCH)]
        )

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self._request([text])[0]
        return vector

    def close(self) -> None:
        self._client.close()

    def _request(self, texts: list[str]) -> Vectors:
        body = post_json(
            self._client,
            "/embeddings",
            {"model": self._model, "input": texts},
            error=EmbeddingProviderError,
            hint="check the model name and API key",
        )
        return self._vectors(body, len(texts))

    def _vectors(self, body: Any, expected: int) -> Vectors:
        try:
            rows = sorted(body["data"], key=lambda item: item["index"])
            vectors = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingProviderError(
                f"the embeddings endpoint answered something that is not an embeddings list: {exc}"
            ) from exc
        if vectors.ndim != 2 or len(vectors) != expected:
            raise EmbeddingProviderError(
                f"asked for {expected} embeddings, the endpoint returned {len(vectors)}"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit: Vectors = vectors / np.maximum(norms, 1e-12)
        return unit


def _configured(settings: Settings) -> OpenAICompatibleEmbedder:
    return OpenAICompatibleEmbedder(
        settings.embedding_base_url,
        settings.embedding_model,
        api_key=settings.embedding_api_key,
        dims=settings.embedding_dims,
    )


def _for_model(model_id: str, settings: Settings) -> OpenAICompatibleEmbedder | None:
    # Another model of the configured endpoint (a projection built before a model change).
    name = model_id.removeprefix(openai_model_id(""))
    if name == model_id or not settings.embedding_base_url:
        return None
    return OpenAICompatibleEmbedder(
        settings.embedding_base_url, name, api_key=settings.embedding_api_key
    )


PROVIDER = EmbedderProvider(
    model_id=lambda settings: openai_model_id(settings.embedding_model),
    configured=_configured,
    for_model=_for_model,
)
