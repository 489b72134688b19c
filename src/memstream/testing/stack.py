"""What a test gets from the plugin: a running memstream's settings, and a wait on recall.

A `MemstreamStack` is plain data (the `MEMSTREAM_*` settings that reach it, the server's URL
and admin key when there is one), so a test can hand `.env` to a subprocess, an agent
framework or its own code under test exactly as a deployment would.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.memory.events import TurnCompleted

__all__ = ["Images", "MemstreamStack", "probe_event", "wait_until_recallable"]

RECALL_DEADLINE_S = 60.0


@dataclass(frozen=True, slots=True)
class Images:
    """The images a container-backed stack runs. The defaults are the ones `make images`
    builds; where those are absent the plugin falls back to the official Kafka and Redis."""

    memstream: str = "localhost/memstream:latest"
    kafka: str = "localhost/memstream-kafka:latest"
    redis: str = "localhost/memstream-redis:latest"


@dataclass(frozen=True, slots=True)
class MemstreamStack:
    """A running memstream: `env` holds the `MEMSTREAM_*` settings that reach it (its own
    namespace, master key and servers); `server_url` and `api_key` (an admin key) are set when
    the stack runs `memstream serve`; `backend` says what runs it ('containers' or 'local')."""

    env: Mapping[str, str]
    backend: str
    server_url: str | None = None
    api_key: str | None = field(default=None, repr=False)

    @property
    def settings(self) -> Settings:
        return Settings.from_env(self.env)

    def deployment(self) -> Deployment:
        """A new Deployment on this stack (close it, or use it in a `with` block)."""
        return Deployment(self.settings)


def wait_until_recallable(
    deployment: Deployment,
    tenant: str,
    text: str,
    *,
    query: str | None = None,
    k: int = 10,
    timeout_s: float = RECALL_DEADLINE_S,
) -> None:
    """Return once recalling `query` (default: `text`) for `tenant` finds a memory containing
    `text`: writes are answered when Kafka has them and recallable once a worker projected
    them, so a test that reads its own write waits here rather than sleeping. AssertionError,
    saying what was recalled instead, after `timeout_s`."""
    store = deployment.stores()(tenant)
    deadline = time.monotonic() + timeout_s
    while True:
        hits = store.search(query or text, k=k)
        if any(text in hit.memory.content for hit in hits):
            return
        if time.monotonic() > deadline:
            seen = [hit.memory.content[:60] for hit in hits]
            raise AssertionError(
                f"after {timeout_s:.0f}s no memory of tenant {tenant!r} containing {text!r} is "
                f"recallable (recalled: {seen}); is a worker running on namespace "
                f"{deployment.settings.namespace}?"
            )
        time.sleep(0.05)


def probe_event(embedding_model: str) -> TurnCompleted:
    """An event of a tenant no test uses: once it is applied, a worker is projecting."""
    return TurnCompleted(
        tenant="__memstream-testing-probe__",
        thread="probe",
        run=uuid.uuid4().hex,
        turn=0,
        query="is the worker projecting?",
        answer="yes",
        recorded_at=datetime.now(UTC),
        importance=0.0,
        embedding_model=embedding_model,
    )
