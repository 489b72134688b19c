"""The server's parts, built from a `Deployment`: the memory service over its projection and
producer, and the API keys in its projection backend. `memstream serve`, `memstream mcp`, the
benches and the tests build the server from these, so the composition root never imports the
server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from memstream.deployment import Deployment
from memstream.server.api_keys import ApiKeys
from memstream.server.mapping import Scoping
from memstream.server.service import Limits, MemoryService
from memstream.server.sessions import SessionService
from memstream.server.tombstones import TombstoneChecks

__all__ = ["api_keys", "memory_service"]


def api_keys(deployment: Deployment) -> ApiKeys:
    """The server's API keys (stored hashed under the namespace), each found valid trusted for
    MEMSTREAM_SERVER_KEY_CACHE_S."""
    return ApiKeys(deployment.projection.api_keys(), cache_s=deployment.settings.server_key_cache_s)


@asynccontextmanager
async def memory_service(deployment: Deployment) -> AsyncIterator[MemoryService]:
    """What the HTTP API and the MCP tools do, over `deployment`, its producer started."""
    settings = deployment.settings
    deployment.check_embedder()
    await deployment.ensure_topics()
    async with deployment.event_publisher() as publisher:
        scoping = Scoping(
            tenant_field=settings.server_tenant_field,
            default_importance=settings.default_importance,
            max_record_chars=settings.max_record_chars,
        )
        # Both services' writes check for tombstones through one coalescer, and sessions are
        # read and written, on this loop.
        tombstones = deployment.projection.tombstones()
        checks = TombstoneChecks(tombstones)
        store = deployment.projection.working_memory()
        chat = deployment.chat_model()  # summaries past a window; compaction's merges
        sessions = SessionService(
            store=store,
            publisher=publisher,
            tombstones=checks,
            scoping=scoping,
            embedding_model=deployment.embedding_model,
            summarizer=chat,
        )
        service = MemoryService(
            publisher=publisher,
            search=deployment.projection.search(
                deployment.embedders, tuning=deployment.recall_tuning()
            ),
            reader=deployment.reader(),
            tombstones=checks,
            status=deployment.status(),
            scoping=scoping,
            limits=Limits(
                max_records=settings.server_max_records,
                max_query_chars=settings.server_max_query_chars,
                max_wait_s=settings.server_max_wait_s,
            ),
            embedding_model=deployment.embedding_model,
            sessions=sessions,
            lineage=deployment.lineage(),
            merger=chat,
        )
        try:
            yield service
        finally:
            await tombstones.aclose()
            await store.aclose()
