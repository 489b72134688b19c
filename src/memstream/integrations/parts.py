"""The parts every framework adapter needs, built from Settings in one place.

Adapters never build Kafka or Redis clients themselves: they take `AdapterParts`, so that the
composition root (when there is one) can hand them its own parts instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from memstream.config import Settings
from memstream.eventsourced import EventSourcedStores
from memstream.projections.connection import redis_client
from memstream.projections.reader import ProjectionReader
from memstream.projections.schema import Keyspace
from memstream.projections.status import ProjectionStatus
from memstream.providers import embedder_from_settings

__all__ = ["AdapterParts"]


@dataclass(frozen=True, slots=True)
class AdapterParts:
    """Writes through the log (`stores`), reads of the projection (`reader`, `status`)."""

    settings: Settings
    stores: EventSourcedStores
    reader: ProjectionReader
    status: ProjectionStatus

    @classmethod
    def from_settings(cls, settings: Settings) -> AdapterParts:
        keyspace = Keyspace(settings.namespace)
        client = redis_client(settings.redis)
        return cls(
            settings=settings,
            stores=EventSourcedStores(settings, embedder=embedder_from_settings(settings)),
            reader=ProjectionReader(client, keyspace, url=settings.redis),
            status=ProjectionStatus(client, keyspace, url=settings.redis),
        )

    def close(self) -> None:
        """Send what is queued (up to 10 s) and stop the publisher."""
        self.stores.close()
