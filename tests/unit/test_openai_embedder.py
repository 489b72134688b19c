"""The OpenAI-compatible embedder's HTTP handling, over httpx's mock transport."""

import json

import httpx
import numpy as np
import pytest

from memstream.errors import ConfigurationError, EmbeddingProviderError
from memstream.providers.openai_compatible import OpenAICompatibleEmbedder


def server(*answers: httpx.Response) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    return httpx.MockTransport(handle), seen


def vectors(*rows: list[float]) -> httpx.Response:
    data = [{"index": i, "embedding": row} for i, row in reversed(list(enumerate(rows)))]
    return httpx.Response(200, json={"data": data})


def embedder(transport: httpx.MockTransport, **kwargs: object) -> OpenAICompatibleEmbedder:
    return OpenAICompatibleEmbedder(
        "http://llm.test/v1",
        "nomic-embed",
        dims=2,
        transport=transport,
        **kwargs,  # type: ignore[arg-type]
    )


def test_vectors_come_back_in_order_and_unit_length(monkeypatch: pytest.MonkeyPatch) -> None:
    transport, seen = server(vectors([3.0, 4.0], [0.0, 2.0]))
    out = embedder(transport, api_key="sk-test").embed_documents(["a", "b"])
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 1.0]], rtol=1e-6)
    (request,) = seen
    assert request.url == "http://llm.test/v1/embeddings"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert json.loads(request.content) == {"model": "nomic-embed", "input": ["a", "b"]}


def test_busy_and_failing_servers_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.sleep", lambda _s: None)
    transport, seen = server(httpx.Response(429), httpx.Response(503), vectors([1.0, 0.0]))
    assert embedder(transport).embed_query("q").tolist() == [1.0, 0.0]
    assert len(seen) == 3


def test_a_client_error_is_not_retried_and_says_what_the_server_said() -> None:
    transport, seen = server(httpx.Response(404, text="model 'nomic-embed' not found"))
    with pytest.raises(EmbeddingProviderError, match="answered 404: model 'nomic-embed' not found"):
        embedder(transport).embed_query("q")
    assert len(seen) == 1


def test_a_server_that_keeps_failing_gives_up_with_the_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("time.sleep", lambda _s: None)
    transport, _ = server(*[httpx.Response(500)] * 5)
    with pytest.raises(EmbeddingProviderError, match="after 5 tries"):
        embedder(transport).embed_query("q")


def test_a_wrong_number_of_vectors_is_refused() -> None:
    transport, _ = server(vectors([1.0, 0.0]))
    with pytest.raises(EmbeddingProviderError, match="asked for 2 embeddings"):
        embedder(transport).embed_documents(["a", "b"])


def test_dims_are_asked_of_the_server_when_not_configured() -> None:
    transport, seen = server(vectors([1.0, 0.0, 0.0]))
    probe = OpenAICompatibleEmbedder("http://llm.test/v1", "m", transport=transport)
    assert probe.dims == 3 and len(seen) == 1
    assert probe.model_id == "openai-compatible:m"


def test_missing_configuration_says_which_variables() -> None:
    with pytest.raises(ConfigurationError, match="MEMSTREAM_EMBEDDING_BASE_URL"):
        OpenAICompatibleEmbedder("", "m")
