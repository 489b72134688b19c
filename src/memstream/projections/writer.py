"""The projection's write side: apply memory events to Redis, each at most once.

`ProjectionWriter.apply` takes events whose memories are already embedded and runs
apply_once.lua over them, a few events a call, each event one packed argument. For each event,
the applied marker, the memory writes (or removals, for a forget or a consolidation), the
consumer position and the tenant's bound eviction commit together or not at all. A
redelivered or replayed event finds its marker and returns the outcome recorded the first
time, writing nothing.

Which generation it writes: the live one (read per batch, and checked inside the script, so a
swap between the read and the write cannot leave an event in the retired generation), or,
for a rebuild, a named generation that is not live yet.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack
import redis.asyncio
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError
from redisvl.index import AsyncSearchIndex

from memstream.errors import ConfigurationError
from memstream.memory.embeddings import Vectors
from memstream.memory.events import REGISTRY, Applies, MemoryEvent
from memstream.memory.model import Memory, derived_from
from memstream.memory.ports import AppliedOutcome, Embedded, PositionsBehind
from memstream.projections.connection import compact_async, redis_errors, text
from memstream.projections.generations import RedisGenerations
from memstream.projections.live_reads import LiveReads
from memstream.projections.schema import (
    Fields,
    Keyspace,
    VectorType,
    lua,
    memory_index_schema,
    to_hash,
)

__all__ = ["EVENTS_PER_CALL", "RedisProjectionWriter", "outcome_of"]

_APPLY_ONCE = lua("apply_once.lua")

# Events per apply_once.lua call. A call holds Redis (recall waits behind it) while its events
# index, about 0.13 ms an event; replay ran as fast at 1, 4, 16 and 64 (docs/benchmarks.md),
# so a call stays short.
EVENTS_PER_CALL = 4

# KEYS: the live-generation pointer, the positions hash. ARGV[1]: the generation to check
# ("": none), then field/offset/held triples. Only moves positions forward, never into a
# retired generation, and only where the position shows Redis holds offset `held` (the last
# event the caller applied there): a Redis that restarted on older data between the apply and
# this call must stay behind, so that healing sees the gap.
_ADVANCE = """
if ARGV[1] ~= '' and (redis.call('GET', KEYS[1]) or '1') ~= ARGV[1] then return 0 end
for i = 2, #ARGV, 3 do
  local current = tonumber(redis.call('HGET', KEYS[2], ARGV[i]) or '-1')
  if tonumber(ARGV[i + 1]) > current and current >= tonumber(ARGV[i + 2]) then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
return 1
"""

# ARGV: three field names, then memory keys. Those fields of each memory (nils where it has
# none), in one call: a pipelined HMGET a memory cost a tenth of replay's time in redis-py.
_KNOWN = """
local rows = {}
for i = 4, #ARGV do
  rows[#rows + 1] = redis.call('HMGET', ARGV[i], ARGV[1], ARGV[2], ARGV[3])
end
return rows
"""


# KEYS: a generation's meta. ARGV: model, dims, vector type. Written once, whole, by whoever
# creates the generation (two workers may race to), then read: what its index holds.
_META = """
if redis.call('HSETNX', KEYS[1], 'embedding_model', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'dims', ARGV[2], 'vector_type', ARGV[3])
end
return redis.call('HMGET', KEYS[1], 'embedding_model', 'dims', 'vector_type')
"""


def outcome_of(event: MemoryEvent, reply: Sequence[object]) -> AppliedOutcome:
    """The outcome apply_once.lua replied for `event`."""
    applied, recorded, evicted = reply
    body = json.loads(text(recorded))
    return AppliedOutcome(
        event=event,
        applied_now=applied == 1,
        memory_ids=tuple(body.get("memories", ())),
        evicted=tuple(text(e) for e in evicted),  # type: ignore[attr-defined]
        removed=tuple(body.get("removed", ())),
        skipped=body.get("skipped", ""),
        missing=tuple(body.get("missing", ())),
    )


class RedisProjectionWriter:
    """Applies embedded events to the projection of one namespace (`keyspace`'s generation is
    ignored: each call says or reads which generation it writes). A generation it creates
    stores vectors as `vector_type`; one that exists keeps its own."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        keyspace: Keyspace,
        *,
        max_memories: int,
        vector_type: VectorType = VectorType.FLOAT16,
        url: str = "",
    ) -> None:
        self._client = client
        self._keys = keyspace
        self._max_memories = max_memories
        self._vector_type = vector_type
        self._url = url
        self._script: AsyncScript = client.register_script(_APPLY_ONCE)
        self._advance: AsyncScript = client.register_script(_ADVANCE)
        self._known: AsyncScript = client.register_script(_KNOWN)
        self._meta: AsyncScript = client.register_script(_META)
        self._types: dict[int, VectorType] = {}  # a generation's type never changes
        self._live = LiveReads(client, keyspace, url=url)
        self._generations = RedisGenerations(client, keyspace, url=url)

    async def ensure_live_index(self, embedding_model: str, dims: int) -> int:
        """Make sure the live generation has its index and recall's alias points at one."""
        generation = await self._generations.live()
        await self.ensure_index(embedding_model, dims, generation)
        with redis_errors(self._url, "creating the recall alias"):
            try:
                await self._client.execute_command(  # type: ignore[no-untyped-call]
                    "FT.ALIASADD", self._keys.alias, self._keys.at(generation).index_name
                )
            except redis.ResponseError as exc:
                if "alias already exists" not in str(exc).lower():
                    raise
        return generation

    async def ensure_index(
        self, embedding_model: str, dims: int, generation: int, *, like: int | None = None
    ) -> None:
        """Create `generation`'s search index if missing; refuse one built for another model.
        `like` names a generation whose vector type a new one takes (a one-tenant rebuild's
        keys are renamed into it)."""
        keys = self._keys.at(generation)
        vector_type = self._vector_type if like is None else await self._type_of(like)
        with redis_errors(self._url, "creating the memory index"):
            raw_model, raw_dims, raw_type = await self._meta(
                keys=[keys.meta], args=[embedding_model, dims, vector_type.value]
            )
            stored_model, stored_dims = text(raw_model), int(text(raw_dims))
            if stored_model != embedding_model or stored_dims != dims:
                raise ConfigurationError(
                    f"the index {keys.index_name} holds vectors of "
                    f"{stored_model} ({stored_dims} dims), but this process embeds "
                    f"with {embedding_model} ({dims} dims); vectors of two models cannot be "
                    "compared. Use the same MEMSTREAM_EMBEDDER, or another MEMSTREAM_NAMESPACE "
                    "and replay the log into it."
                )
            stored_type = VectorType(text(raw_type)) if raw_type else VectorType.FLOAT32
            self._types[generation] = stored_type
            schema = memory_index_schema(keys, dims, stored_type)
            index = AsyncSearchIndex(schema, redis_client=self._client)
            if not await index.exists():
                await index.create(overwrite=False)

    async def _type_of(self, generation: int) -> VectorType:
        """How `generation` stores its vectors (FLOAT32 when its meta does not say: it was
        built before the choice, or is not built yet)."""
        if generation not in self._types:
            with redis_errors(self._url, "reading a generation's vector type"):
                raw = await self._client.hget(self._keys.at(generation).meta, "vector_type")
            if raw is None:
                return VectorType.FLOAT32
            self._types[generation] = VectorType(text(raw))
        return self._types[generation]

    async def apply(
        self,
        batch: Sequence[Embedded],
        *,
        into: int | None = None,
        while_live: int | None = None,
        follows: Mapping[str, int] | None = None,
    ) -> list[AppliedOutcome]:
        """Apply every event of `batch` in order, each atomic on its own.

        `into` names a generation being rebuilt; by default the live generation is written.
        When a swap retires the live generation mid-batch, the events the script refused are
        applied again to the new live generation (the ones before them are already there: a
        swap only happens once the new generation has caught up with the old one) — unless
        `while_live` named the generation the vectors were made for: then the outcomes stop
        at the refusal, and the caller embeds the rest for the new generation's model.

        `follows` is checked by every call of the script before it writes (the worker's
        check for lost writes, without a round trip of its own): where a position is behind
        it, PositionsBehind. A first call refused refuses the later ones, which carry the same
        offsets; a later call refused after earlier ones applied (Redis lost their writes in
        between) leaves those to apply again as redeliveries.
        """
        outcomes: list[AppliedOutcome] = []
        pending = list(batch)
        gate = msgpack.packb(dict(follows)) if follows else ""  # the script's ARGV[3]
        while pending:
            if into is not None:
                generation = into
            elif while_live is not None:
                generation = while_live
            else:
                generation = await self._generations.live()
            checked = "" if into is not None else str(generation)
            keys = self._keys.at(generation)
            vector_type = await self._type_of(generation)
            packed = [_packed(keys, item, vector_type) for item in pending]
            calls: list[list[str | int | bytes]] = [
                [checked, self._max_memories, gate, *packed[start : start + EVENTS_PER_CALL]]
                for start in range(0, len(packed), EVENTS_PER_CALL)
            ]
            with redis_errors(self._url, "applying memory events"):
                replies = await self._each(
                    self._script, [keys.generation_key, keys.positions], calls
                )
            done = 0
            for reply in replies:
                if reply == -2:
                    raise PositionsBehind(f"a position is behind {dict(follows or {})}")
                if reply == -1:  # retired generation: this call's events and every later one
                    break
                for event_reply in reply:
                    outcomes.append(outcome_of(pending[done].event, event_reply))
                    done += 1
            pending = pending[done:]
            if pending and while_live is not None:
                break  # `while_live` was retired: the rest need vectors for the new one
        # A large forget: a restart should not replay every write of what was forgotten.
        removed = sum(len(o.removed) for o in outcomes if o.applied_now)
        with redis_errors(self._url, "rewriting the append-only file"):
            await compact_async(self._client, removed)
        return outcomes

    async def _each(
        self, script: AsyncScript, keys: list[str], calls: Sequence[Sequence[str | int | bytes]]
    ) -> list[Any]:
        """`script`'s replies to each of `calls` (its arguments), in one round trip: called by
        its hash, and loaded only when Redis says it lacks it (after a restart). A pipeline of
        registered scripts asks Redis whether it has them before every execution: a round
        trip of its own, one in three of the worker's a batch under load (issue 37)."""

        async def run() -> list[Any]:
            async with self._client.pipeline(transaction=False) as pipe:
                for args in calls:
                    pipe.evalsha(script.sha, len(keys), *keys, *args)
                return await pipe.execute()

        try:
            return await run()
        except NoScriptError:
            await self._client.script_load(script.script)
            return await run()

    async def advance(
        self,
        positions: Mapping[str, int],
        *,
        into: int | None = None,
        held: Mapping[str, int] | None = None,
    ) -> None:
        """Record offsets taken into account without applying anything (dead letters, other
        tenants' events in a one-tenant rebuild), so positions and lag stay exact. Where
        `held` names a partition's last applied offset, the position moves only if it shows
        Redis still holds that one. Like `apply`, it writes the live generation unless told
        `into`."""
        if not positions:
            return
        generation = into if into is not None else await self._generations.live()
        keys = self._keys.at(generation)
        args: list[str | int] = ["" if into is not None else generation]
        for name, offset in positions.items():
            args += [name, offset, (held or {}).get(name, -1)]
        with redis_errors(self._url, "recording positions"):
            await self._advance(keys=[keys.generation_key, keys.positions], args=args)

    async def positions(self) -> dict[str, int]:
        """The live generation's positions, read with it in one round trip (the worker's
        healer reads them before every batch)."""
        (raw,) = await self._live.read(
            lambda pipe, keys: pipe.hgetall(keys.positions), "reading positions"
        )
        return {text(field): int(text(offset)) for field, offset in raw.items()}

    async def known_vectors(self, memories: Sequence[Memory]) -> list[Vectors | None]:
        """The vectors the live generation already holds for `memories`: only where the stored
        memory has the same id, content and embedding model (a vector is a function of those
        two), None elsewhere. Lets a rebuild skip the embedder for what it rewrites."""
        live = await self._generations.live()
        keys = self._keys.at(live)
        vector_type = await self._type_of(live)
        with redis_errors(self._url, "reading stored vectors"):
            wanted = [Fields.CONTENT, Fields.EMBEDDING_MODEL, Fields.EMBEDDING]
            rows = await self._known(
                args=[*wanted, *(keys.memory(m.tenant, m.id) for m in memories)]
            )
        return [
            vector_type.read(blob)
            if blob is not None and text(content) == m.content and text(model) == m.embedding_model
            else None
            for m, (content, model, blob) in zip(memories, rows, strict=True)
        ]


def _packed(keys: Keyspace, item: Embedded, vector_type: VectorType) -> bytes:
    """`item` as apply_once.lua's argument for one event: a MessagePack array, packed in one
    call (a memory's sixteen fields were sixteen pairs of arguments, each encoded by redis-py
    on its own: a third of replay's time)."""
    event = item.event
    position = item.position
    row = REGISTRY.of(event)
    args: list[object] = [
        event.id,
        row.applies.value,
        position.field if position else "",
        str(position.offset if position else -1),
        keys.applied(event.tenant),
        keys.order(event.tenant),
        keys.forgotten(event.tenant),
        keys.tenant_memory_prefix(event.tenant),
        keys.orders_prefix(event.tenant),
    ]
    if row.applies is Applies.EXPIRE:
        lapse = row.lapse(event)
        args += [lapse.memory_id, lapse.put_event_id, repr(lapse.deadline.timestamp())]
    elif row.applies is Applies.FORGET:
        chosen = row.selection(event)
        before = chosen.before
        selector = {
            "ids": list(chosen.ids),
            "thread": chosen.thread,
            "before_us": round(before.timestamp() * 1_000_000) if before else None,
            "everything": chosen.everything,
        }
        args.append(json.dumps(selector))
    elif row.applies is Applies.ERASE:  # the whole tenant: its documents too
        args.append(keys.documents(event.tenant))
    elif row.applies is Applies.DOCUMENT:
        changes = [
            {k: v for k, v in (("f", c.field), ("b", c.body), ("x", c.expect)) if v is not None}
            for c in row.changes(event)
        ]
        args += [keys.documents(event.tenant), changes]
    else:
        facets = item.facets or (None,) * len(item.memories)
        written = []
        for memory, vector, facet_vectors in zip(item.memories, item.vectors, facets, strict=True):
            fields = to_hash(memory, vector, facet_vectors, vector_type)
            pairs = [part for pair in fields.items() for part in pair]
            sources = list(derived_from(memory))
            written.append([memory.id, fields[Fields.ORDER_MEMBER], pairs, sources])
        args.append(written)
        if row.applies in (Applies.CONSOLIDATE, Applies.REPLACE):
            args.append(json.dumps(list(row.replaced(event))))
    # Bytes as MessagePack's raw strings: Redis's cmsgpack reads no bin type.
    packed: bytes = msgpack.packb(args, use_bin_type=False)
    return packed
