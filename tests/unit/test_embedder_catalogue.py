"""The embedders a process can use, by model id: the projection decides which model, and a
process that cannot make it says so at once, naming both models and the fix."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from memstream import Settings
from memstream.errors import ConfigurationError
from memstream.memory.embeddings import Vectors
from memstream.providers import (
    EMBEDDERS,
    EmbedderCatalogue,
    embedder_from_settings,
    embedding_model_id,
)
from memstream.providers.bge import BGE_MODEL_ID


class Given:
    model_id, dims = "given@1", 2

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return np.zeros((len(texts), 2), dtype=np.float32)

    def embed_query(self, text: str) -> Vectors:
        return np.zeros(2, dtype=np.float32)


def test_the_given_embedder_is_the_configured_one_and_is_loaded_once() -> None:
    given = Given()
    catalogue = EmbedderCatalogue(Settings(), given)
    assert catalogue.configured_model == "given@1"
    assert catalogue.configured() is given
    assert catalogue.for_model("given@1") is given


def test_the_configured_model_is_named_without_loading_it() -> None:
    assert EmbedderCatalogue(Settings()).configured_model == BGE_MODEL_ID


@pytest.mark.parametrize(
    "model",
    [
        "openai-compatible:text-embedding-3-small",
        "someone-elses-model@3",
        "all-MiniLM-L6-v2-onnx-int8@0.0.1",
    ],
)
def test_a_model_this_process_cannot_make_is_refused_naming_both_models_and_the_fix(
    model: str,
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        EmbedderCatalogue(Settings(), Given()).for_model(model)
    said = str(refused.value)
    assert model in said and "given@1" in said
    assert "memstream replay" in said and "MEMSTREAM_EMBEDDING_BASE_URL" in said


def test_each_embedder_name_is_a_provider_that_names_its_model_without_loading_it() -> None:
    # A new embedder is its module's PROVIDER and its line in EMBEDDERS: nothing else chooses.
    for name in EMBEDDERS:
        settings = Settings(
            embedder=name,
            embedding_model="m",
            embedding_base_url="http://x",
            embedder_files=f"model.onnx={'a' * 64},tokenizer.json={'b' * 64}",
        )
        assert embedding_model_id(settings)  # offline, no server called, no model loaded
    assert embedding_model_id(Settings(embedder="openai", embedding_model="m")) == (
        "openai-compatible:m"
    )


def test_an_unknown_embedder_is_refused_naming_every_choice() -> None:
    with pytest.raises(ConfigurationError) as refused:
        embedder_from_settings(Settings(embedder="bert-huge"))
    said = str(refused.value)
    assert "'bert-huge'" in said and all(repr(name) in said for name in EMBEDDERS)
