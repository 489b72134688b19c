"""The in-memory projection backend passes the backend contract, with no service running."""

from __future__ import annotations

import pytest

from memstream.backends import ProjectionBackend, projection_backend
from memstream.config import Settings
from memstream.errors import ConfigurationError
from memstream.inmemory.backend import InMemoryProjection

from ..contract.backend_contract import BackendContract


def _settings(namespace: str, bound: int) -> Settings:
    return Settings.from_env(
        {
            "MEMSTREAM_BACKEND": "memory",
            "MEMSTREAM_NAMESPACE": namespace,
            "MEMSTREAM_MAX_MEMORIES": str(bound),
        }
    )


class TestInMemoryBackend(BackendContract):
    __test__ = True

    def make_backend(self, namespace: str) -> ProjectionBackend:
        return projection_backend(_settings(namespace, self.bound), lambda tenant: 0)


def test_two_projections_of_one_namespace_in_a_process_share_its_state() -> None:
    one = InMemoryProjection(_settings("shared-ns", 10), lambda tenant: 0)
    two = InMemoryProjection(_settings("shared-ns", 10), lambda tenant: 0)
    other = InMemoryProjection(_settings("other-ns", 10), lambda tenant: 0)
    one.api_keys().put("digest", "record")
    assert two.api_keys().get("digest") == "record"
    assert other.api_keys().get("digest") is None
    one.drop()
    assert two.api_keys().count() == 0


def test_the_in_memory_backend_has_one_shard_and_cannot_be_resharded() -> None:
    projection = InMemoryProjection(_settings("one-shard", 10), lambda tenant: 0)
    assert projection.current_layout().urls == ("memory://one-shard",)
    with pytest.raises(ConfigurationError, match="one shard"):
        projection.resharding()
    assert projection.rewrite_files(1.0) == [] and projection.access_command("worker") is None
