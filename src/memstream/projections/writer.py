"""The projection's write side: apply memory events to Redis, each at most once.

`ProjectionWriter.apply` takes events whose memories are already embedded and runs
apply_once.lua for each: the applied marker, the memory hashes, the consumer position and the
tenant's bound eviction commit together or not at all. A redelivered or replayed event finds
its marker and returns the outcome recorded the first time, writing nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files

import redis.asyncio
from redis.commands.core import AsyncScript
from redisvl.index import AsyncSearchIndex

from memstream.errors import ConfigurationError
from memstream.memory.embeddings import Vectors
from memstream.memory.events import MemoryEvent
from memstream.memory.model import Memory
from memstream.projections.connection import redis_errors
from memstream.projections.schema import Keyspace, memory_index_schema, order_member, to_hash

__all__ = ["AppliedOutcome", "Embedded", "Position", "ProjectionWriter"]

_APPLY_ONCE = files("memstream.projections").joinpath("apply_once.lua").read_text()


@dataclass(frozen=True, slots=True)
class Position:
    """Where an event sits in the log."""

    topic: str
    partition: int
    offset: int

    @property
    def field(self) -> str:
        return f"{self.topic}/{self.partition}"


@dataclass(frozen=True, slots=True)
class Embedded:
    """An event ready to apply: its memories and one vector per memory, in the same order."""

    event: MemoryEvent
    memories: tuple[Memory, ...]
    vectors: Vectors
    position: Position | None = None


@dataclass(frozen=True, slots=True)
class AppliedOutcome:
    event_id: str
    applied_now: bool
    memory_ids: tuple[str, ...]
    evicted: tuple[str, ...]


class ProjectionWriter:
    def __init__(
        self,
        client: redis.asyncio.Redis,
        keyspace: Keyspace,
        *,
        max_memories: int,
        url: str = "",
    ) -> None:
        self._client = client
        self._keys = keyspace
        self._max_memories = max_memories
        self._url = url
        self._script: AsyncScript = client.register_script(_APPLY_ONCE)

    async def ensure_index(self, embedding_model: str, dims: int) -> None:
        """Create the search index if it is missing; refuse one built for another model."""
        with redis_errors(self._url, "creating the memory index"):
            await self._client.hsetnx(self._keys.meta, "embedding_model", embedding_model)
            await self._client.hsetnx(self._keys.meta, "dims", str(dims))
            raw_model, raw_dims = await self._client.hmget(
                self._keys.meta, ["embedding_model", "dims"]
            )
            stored_model, stored_dims = _text(raw_model), int(_text(raw_dims))
            if stored_model != embedding_model or stored_dims != dims:
                raise ConfigurationError(
                    f"the index {self._keys.index_name} holds vectors of "
                    f"{stored_model} ({stored_dims} dims), but this process embeds "
                    f"with {embedding_model} ({dims} dims); vectors of two models cannot be "
                    "compared. Use the same MEMSTREAM_EMBEDDER, or another MEMSTREAM_NAMESPACE "
                    "and replay the log into it."
                )
            index = AsyncSearchIndex(
                memory_index_schema(self._keys, dims), redis_client=self._client
            )
            if not await index.exists():
                await index.create(overwrite=False)

    async def apply(self, batch: Sequence[Embedded]) -> list[AppliedOutcome]:
        """Apply every event of `batch` (one round trip); each is atomic on its own."""
        async with self._client.pipeline(transaction=False) as pipe:
            for item in batch:
                keys, args = self._script_call(item)
                await self._script(keys=keys, args=args, client=pipe)
            with redis_errors(self._url, "applying memory events"):
                replies = await pipe.execute()
        return [
            AppliedOutcome(
                event_id=item.event.id,
                applied_now=bool(reply[0]),
                memory_ids=tuple(json.loads(reply[1])["memories"]),
                evicted=tuple(e.decode() for e in reply[2]),
            )
            for item, reply in zip(batch, replies, strict=True)
        ]

    async def is_applied(self, tenant: str, event_id: str) -> bool:
        with redis_errors(self._url, "reading applied markers"):
            return bool(await self._client.hexists(self._keys.applied(tenant), event_id))

    def _script_call(self, item: Embedded) -> tuple[list[str], list[str | bytes | int]]:
        event = item.event
        outcome = json.dumps({"memories": [m.id for m in item.memories]})
        keys = [
            self._keys.applied(event.tenant),
            self._keys.order(event.tenant),
            self._keys.positions,
            *(self._keys.memory(m.tenant, m.id) for m in item.memories),
        ]
        position = item.position
        args: list[str | bytes | int] = [
            event.id,
            outcome,
            self._max_memories,
            position.field if position else "",
            position.offset if position else -1,
            self._keys.tenant_memory_prefix(event.tenant),
        ]
        for memory, vector in zip(item.memories, item.vectors, strict=True):
            fields = to_hash(memory, vector)
            micros = round(memory.timestamp.timestamp() * 1_000_000)
            args += [order_member(memory.importance, micros, memory.id), len(fields)]
            for name, value in fields.items():
                args += [name, value]
        return keys, args


def _text(value: bytes | str | None) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
