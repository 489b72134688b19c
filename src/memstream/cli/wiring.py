"""Builds the adapters a command needs from Settings: the one place the CLI wires parts."""

from __future__ import annotations

from memstream.config import Settings
from memstream.projections.connection import redis_client
from memstream.projections.recall import RedisRecaller
from memstream.projections.schema import Keyspace
from memstream.projections.status import ProjectionStatus
from memstream.providers import embedder_from_settings
from memstream.streams.topics import Topics

__all__ = ["projection_status", "recaller", "topics"]


def topics(settings: Settings) -> Topics:
    return Topics(settings.namespace, settings.partitions)


def recaller(settings: Settings) -> RedisRecaller:
    return RedisRecaller(
        redis_client(settings.redis),
        Keyspace(settings.namespace),
        embedder_from_settings(settings),
        url=settings.redis,
    )


def projection_status(settings: Settings) -> ProjectionStatus:
    return ProjectionStatus(
        redis_client(settings.redis), Keyspace(settings.namespace), url=settings.redis
    )
