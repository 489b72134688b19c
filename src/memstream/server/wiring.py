"""Builds the server's parts from Settings: the one place `serve`, `mcp`, `keys` and the
bench wire them (to be folded into the package's composition root)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from memstream.cli import wiring
from memstream.config import Settings
from memstream.projections.connection import redis_client
from memstream.projections.reader import ProjectionReader
from memstream.projections.schema import Keyspace
from memstream.projections.search import FilteredSearch
from memstream.providers import embedder_from_settings
from memstream.server.keys import ApiKeys
from memstream.server.mapping import Scoping
from memstream.server.service import Limits, MemoryService
from memstream.streams.publisher import EventPublisher
from memstream.streams.topics import ensure_topics

__all__ = ["api_keys", "memory_service"]


def api_keys(settings: Settings) -> ApiKeys:
    return ApiKeys(redis_client(settings.redis), settings.namespace, url=settings.redis)


@asynccontextmanager
async def memory_service(settings: Settings) -> AsyncIterator[MemoryService]:
    """The memory service over the deployment's Kafka and Redis, its producer started."""
    topics = wiring.topics(settings)
    await ensure_topics(settings.bootstrap_servers, topics)
    client = redis_client(settings.redis)
    keyspace = Keyspace(settings.namespace)
    embedder = embedder_from_settings(settings)
    async with EventPublisher(settings.bootstrap_servers, topics) as publisher:
        yield MemoryService(
            publisher=publisher,
            search=FilteredSearch(client, keyspace, embedder, url=settings.redis),
            reader=ProjectionReader(client, keyspace, url=settings.redis),
            status=wiring.projection_status(settings),
            scoping=Scoping(
                tenant_field=settings.server_tenant_field,
                default_importance=settings.default_importance,
                max_record_chars=settings.max_record_chars,
            ),
            limits=Limits(
                max_records=settings.server_max_records,
                max_query_chars=settings.server_max_query_chars,
                max_wait_s=settings.server_max_wait_s,
            ),
            embedding_model=embedder.model_id,
        )
