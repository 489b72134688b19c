"""memstream without services, for users' own unit tests: a Deployment whose projection lives
in this process's memory (MEMSTREAM_BACKEND=memory), and `project`, which applies events to a
projection exactly as the worker does — each encoded as its record, decoded, embedded (with
its provenance), applied once through the projection's writer — but in this process, at once,
with no Kafka.

The agent side of such a deployment (`stores()`, the middleware) still writes to Kafka; a test
builds its events and `project`s them instead, then reads through the deployment's reader,
recaller, search and items as an application does (docs/integrations.md, "Testing").
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from memstream.backends import ProjectionBackend
from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import EventDecodeError, InvalidInputError
from memstream.memory.embeddings import Embedder, Embedders
from memstream.memory.events import MemoryEvent
from memstream.memory.model import DEFAULT_IMPORTANCE
from memstream.memory.ports import AppliedOutcome
from memstream.streams.projector import Projector, RawMessage
from memstream.streams.topics import Topics
from memstream.streams.wire import event_record, partition_of

__all__ = ["aproject", "memory_deployment", "project"]


def memory_deployment(
    settings: Mapping[str, str] | None = None, *, embedder: Embedder | None = None
) -> Deployment:
    """A deployment with the in-memory projection, on a namespace of its own unless
    `settings` name one (`MEMSTREAM_*` values; the embedder is the configured one unless
    `embedder` is given). Drop it with `memstream.operations.drop` or
    `deployment.projection.drop()` when done."""
    env = {"MEMSTREAM_NAMESPACE": f"test-{uuid.uuid4().hex[:10]}", **(settings or {})}
    return Deployment(Settings.from_env({**env, "MEMSTREAM_BACKEND": "memory"}), embedder=embedder)


def project(deployment: Deployment, events: Sequence[MemoryEvent]) -> list[AppliedOutcome]:
    """Apply `events`, in order, to `deployment`'s projection as its worker would; what each
    did, in the order given. Not on a running event loop: there, await `aproject`."""
    settings = deployment.settings
    return asyncio.run(
        aproject(
            deployment.projection,
            deployment.embedders,
            events,
            topics=deployment.topics,
            partition_of=lambda tenant: partition_of(tenant, settings.partitions),
            default_importance=settings.default_importance,
        )
    )


async def aproject(
    projection: ProjectionBackend,
    embedders: Embedders,
    events: Sequence[MemoryEvent],
    *,
    topics: Topics,
    partition_of: Callable[[str], int],
    default_importance: float = DEFAULT_IMPORTANCE,
) -> list[AppliedOutcome]:
    """`project` for any projection backend: each event is a record of `topics.memory` at the
    next offset of its tenant's partition (`partition_of`), projected by the shard that owns
    that partition."""
    layout = projection.current_layout()
    by_shard: dict[int, list[tuple[int, MemoryEvent]]] = {}
    for at, event in enumerate(events):
        by_shard.setdefault(layout.of_partition(partition_of(event.tenant)), []).append((at, event))
    outcomes: dict[int, AppliedOutcome] = {}
    for shard, own in by_shard.items():
        async with projection.session(shard) as session:
            projector = Projector(
                embedders,
                session.writer,
                session.generations,
                _Refused(),
                default_importance=default_importance,
            )
            await projector.start()
            following = {
                name: offset + 1 for name, offset in (await session.writer.positions()).items()
            }
            messages = []
            for _, event in own:
                record = event_record(topics, event)
                partition = partition_of(event.tenant)
                name = f"{record.topic}/{partition}"
                offset = following.get(name, 0)
                following[name] = offset + 1
                written = datetime.now(UTC)
                messages.append(
                    RawMessage(record.topic, partition, offset, record.key, record.value, written)
                )
            applied = await projector.project(messages)
        outcomes.update(zip((at for at, _ in own), applied, strict=True))
    return [outcomes[at] for at in range(len(events))]


class _Refused:
    """No dead letters here: an event the caller built that does not read back is a bug."""

    async def send(self, message: RawMessage, error: EventDecodeError) -> None:
        raise InvalidInputError(f"the event at offset {message.offset} did not decode: {error}")
