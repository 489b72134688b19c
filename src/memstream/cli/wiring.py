"""Builds the adapters a command needs from Settings: the one place the CLI wires parts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis.asyncio

from memstream.config import Settings
from memstream.projections.connection import async_redis_client, redis_client
from memstream.projections.recall import RedisRecaller
from memstream.projections.schema import Keyspace
from memstream.projections.status import ProjectionStatus
from memstream.providers import embedder_from_settings
from memstream.streams.replay import Replayer
from memstream.streams.topics import Topics

__all__ = ["async_redis", "projection_status", "recaller", "replayer", "topics"]


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


def async_redis(settings: Settings) -> redis.asyncio.Redis:
    return async_redis_client(settings.redis)


@asynccontextmanager
async def replayer(settings: Settings) -> AsyncIterator[Replayer]:
    client = async_redis(settings)
    try:
        yield Replayer(
            settings.bootstrap_servers,
            topics(settings),
            client,
            Keyspace(settings.namespace),
            embedder_from_settings(settings),
            max_memories=settings.max_memories_per_tenant,
            default_importance=settings.default_importance,
            url=settings.redis,
        )
    finally:
        await client.aclose()
