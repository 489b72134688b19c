"""The projection backend is chosen by name (MEMSTREAM_BACKEND) from `BACKENDS`, imported only
when chosen; an unknown name is refused, naming the choices. Nothing connects when it is made."""

from __future__ import annotations

import pytest

from memstream import Settings
from memstream.backends import BACKENDS, projection_backend
from memstream.deployment import Deployment
from memstream.errors import ConfigurationError
from memstream.inmemory.backend import InMemoryProjection
from memstream.projections.backend import RedisProjection


def test_the_default_backend_is_redis_and_the_deployment_holds_it() -> None:
    settings = Settings.from_env({})
    assert settings.backend == "redis"
    assert isinstance(Deployment(settings).projection, RedisProjection)
    assert isinstance(projection_backend(settings, lambda tenant: 0), RedisProjection)


def test_an_unknown_backend_is_refused_naming_the_ones_there_are() -> None:
    settings = Settings.from_env({"MEMSTREAM_BACKEND": "cassandra"})
    with pytest.raises(ConfigurationError) as refused:
        Deployment(settings)
    assert "MEMSTREAM_BACKEND='cassandra' names no projection backend" in str(refused.value)
    assert ", ".join(sorted(BACKENDS)) in str(refused.value)


def test_memory_names_the_in_memory_backend() -> None:
    settings = Settings.from_env({"MEMSTREAM_BACKEND": "memory", "MEMSTREAM_NAMESPACE": "named"})
    assert isinstance(Deployment(settings).projection, InMemoryProjection)
