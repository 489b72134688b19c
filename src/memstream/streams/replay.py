"""Replay: rebuild the projection from the start of the memory log, beside the live one.

A replay reads every partition of the memory topic from offset 0 with its own consumer (no
group, nothing committed), and runs the same Projector as the worker `into` a generation
allocated for it, so the rebuilt state is exactly what the worker would have written. It
records, per partition, the last offset it has taken into account (applied, skipped as
another tenant's, or unusable), which is what the swap compares with the live generation.

Once it has read up to the log end it can:
- swap (`replay`): swap.lua swaps the rebuilt generation in only if it has caught up with the
  live one; if the live worker got ahead meanwhile, the replay reads on and tries again. A
  whole rebuild then drops the retired generation; a one-tenant rebuild renames the tenant's
  rebuilt keys over its live ones, leaving other tenants untouched.
- stop (`verify`): the rebuilt generation is kept for comparison, then dropped by the caller.

Nothing is announced and nothing dead-lettered again: the live worker did that the first time.
But a message the rebuild cannot read is counted by reason, and unless the caller allows it
the rebuild is neither swapped in nor compared: after a schema change that this build cannot
read, a replay would otherwise drop that history quietly.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from memstream.errors import EventDecodeError, KafkaUnavailableError, ReplayError
from memstream.memory.cipher import Keyring
from memstream.memory.embeddings import Embedders
from memstream.memory.ports import (
    AppliedOutcome,
    Generations,
    Position,
    ProjectionWriter,
    SwapResult,
)
from memstream.memory.tenancy import tenant_key, validate_tenant
from memstream.streams.kafka import KafkaConnection
from memstream.streams.projector import Overlapping, Projector, RawMessage
from memstream.streams.topics import Topics, topic_partitions
from memstream.streams.wire import partition_of

__all__ = ["CountedDeadLetters", "Progress", "Rebuilt", "Replayer", "reached_ends"]

_BATCH = 512
_MAX_SWAP_TRIES = 20


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a replay has read: `done` of `total` messages (total grows if the log does)."""

    done: int
    total: int
    elapsed_s: float

    @property
    def rate(self) -> float:
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def remaining_s(self) -> float | None:
        return (self.total - self.done) / self.rate if self.rate > 0 else None


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """A finished rebuild: its generation, what it read and applied, and where its last
    applied event of each partition sat (what the live projection must have reached too)."""

    generation: int
    live: int
    tenant: str | None
    messages: int
    applied: int
    elapsed_s: float
    swapped: bool
    last_events: Mapping[str, int]
    read_to: Mapping[str, int]  # the last offset read of each partition, whoever's event
    dead_letters: Mapping[str, int]  # messages it could not read, by error code
    # Events sealed under an erased tenant's destroyed key: skipped, and no failure.
    erased: int = 0


class CountedDeadLetters:
    """A rebuild's dead letters: counted by reason (the error's code), not sent again (the
    live worker sent them once)."""

    def __init__(self) -> None:
        self.by_reason: Counter[str] = Counter()

    async def send(self, message: RawMessage, error: EventDecodeError) -> None:
        self.by_reason[error.code] += 1

    def check(self, read: int, *, allowed: bool) -> None:
        """Raise ReplayError if any of the `read` messages could not be read, unless `allowed`."""
        if self.by_reason and not allowed:
            reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.by_reason.items()))
            raise ReplayError(
                f"{self.by_reason.total()} of the {read} messages read cannot be read by this "
                f"build ({reasons}); the rebuild would lack them, so nothing was swapped in "
                "or compared. `memstream tail --from-beginning` shows each DeadLettered with "
                "its reason; if they are junk, run again with --allow-dead-letters."
            )


class Replayer:
    """Rebuilds through the projection's ports: `writer` applies events `into` a generation,
    `generations` allocates, swaps and drops them. It reads the partitions it `owns` (a
    shard's, when the projection is sharded: docs/scaling.md)."""

    def __init__(
        self,
        kafka: KafkaConnection,
        topics: Topics,
        writer: ProjectionWriter,
        generations: Generations,
        embedders: Embedders,
        *,
        default_importance: float,
        keyring: Keyring | None = None,
        owns: Callable[[int], bool] = lambda _: True,
    ) -> None:
        self._kafka = kafka
        self._owns = owns
        self._keyring = keyring
        self._topic = topics.memory
        self._writer = writer
        self._generations = generations
        self._embedders = embedders
        self._default_importance = default_importance

    async def rebuild(
        self,
        tenant: str | None = None,
        *,
        swap: bool,
        reembed: bool = False,
        allow_dead_letters: bool = False,
        progress: Callable[[Progress], None] = lambda _: None,
    ) -> Rebuilt:
        """Rebuild all tenants (or one) into a fresh generation; swap it in if `swap`.

        A whole rebuild is built with the configured embedding model, whatever the events or
        the live generation say: after MEMSTREAM_EMBEDDER changed, `replay` is the model
        switch (the old generation serves until the new one is swapped in). A one-tenant
        rebuild is renamed into the live generation, so it embeds with the live one's model.
        Vectors the live generation holds for the same memory (same id, content and model) are
        reused unless `reembed`: embedding is what bounds a replay's speed. A message that
        cannot be read raises ReplayError, with the count by reason, before anything is
        swapped (the rebuild is dropped), unless `allow_dead_letters`.
        """
        if tenant is not None:
            validate_tenant(tenant)
        live = await self._generations.live()
        target = await self._generations.allocate()
        writer = self._writer
        unusable = CountedDeadLetters()
        projector = Projector(
            self._embedders,
            writer,
            self._generations,
            unusable,
            default_importance=self._default_importance,
            into=target,
            reuse_vectors=not reembed,
            keyring=self._keyring,
        )

        try:
            if tenant is not None:
                # Its keys are renamed into the live generation: vectors of the live model,
                # stored as the live generation stores them.
                live_model = await self._generations.model(live)
                if live_model is not None:
                    embedder = self._embedders.for_model(live_model)
                    await writer.ensure_index(live_model, embedder.dims, target, like=live)
            await projector.start()
            return await self._run(
                projector,
                writer,
                live,
                target,
                tenant,
                swap,
                unusable,
                allow_dead_letters,
                progress,
            )
        except BaseException:  # Ctrl-C included: an abandoned generation is never left behind
            await self._generations.drop(target)
            raise

    async def _run(
        self,
        projector: Projector,
        writer: ProjectionWriter,
        live: int,
        target: int,
        tenant: str | None,
        swap: bool,
        unusable: CountedDeadLetters,
        allow_dead_letters: bool,
        progress: Callable[[Progress], None],
    ) -> Rebuilt:
        started = time.monotonic()
        key = tenant_key(tenant) if tenant is not None else None
        read = applied = 0
        last_events: dict[str, int] = {}
        read_to: dict[str, int] = {}
        consumer = AIOKafkaConsumer(
            **self._kafka.aiokafka(),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            every = await topic_partitions(self._kafka, self._topic)
            partitions = [tp for tp in every if self._owns(tp.partition)]
            await consumer.start()
            if not every:
                raise ReplayError(
                    f"the memory topic {self._topic} does not exist; nothing to replay. Check "
                    "MEMSTREAM_NAMESPACE (a worker or an import creates the topic)."
                )
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)

            async def settled(skipped: dict[str, int], outcomes: list[AppliedOutcome]) -> None:
                """What follows a batch once applied (the batch after it is being prepared)."""
                nonlocal applied
                applied += sum(o.applied_now for o in outcomes)
                await writer.advance(skipped, into=target)

            for _ in range(_MAX_SWAP_TRIES):
                ends = await consumer.end_offsets(partitions)
                total = sum(ends.values())
                async with Overlapping(projector) as overlapping:
                    while not await reached_ends(consumer, ends):
                        batches = await consumer.getmany(timeout_ms=500, max_records=_BATCH)
                        # Every partition's records in one projection: one embedding call, one
                        # pipeline to Redis (per-partition order is kept; partitions are
                        # independent).
                        messages = [
                            RawMessage.of(r)
                            for records in batches.values()
                            for r in records
                            if key is None or r.key == key
                        ]
                        for message in messages:
                            last_events[message.position.field] = message.offset
                        skipped = {}  # other tenants' events: positions still move over them
                        for tp, records in batches.items():
                            read += len(records)
                            if records:
                                last = Position(tp.topic, tp.partition, records[-1].offset)
                                read_to[last.field] = last.offset
                                if key is not None:
                                    skipped[last.field] = last.offset
                        await overlapping.project(messages, partial(settled, skipped))
                        progress(Progress(read, total, time.monotonic() - started))
                unusable.check(read, allowed=allow_dead_letters)
                if not swap:
                    break
                result = await (
                    self._generations.swap_all(live, target)
                    if tenant is None
                    else self._generations.swap_tenant(
                        live, target, validate_tenant(tenant), _home(self._topic, tenant, every)
                    )
                )
                if result is SwapResult.SWAPPED:
                    await self._generations.drop(live if tenant is None else target)
                    break
                if result is SwapResult.STALE:
                    raise ReplayError(
                        f"another replay swapped in a new generation while this one ran "
                        f"(generation {live} is no longer live); nothing was swapped. Run the "
                        "replay again if it is still needed."
                    )
                # BEHIND: the worker took in newer offsets meanwhile; read them too.
            else:
                raise ReplayError(
                    f"the live worker stayed ahead of the replay through {_MAX_SWAP_TRIES} tries; "
                    "nothing was swapped. Run the replay again when the log is quieter."
                )
        except KafkaError as exc:
            raise KafkaUnavailableError(
                f"could not read the memory log from Kafka at {self._kafka.where}: "
                f"{await self._kafka.explain(exc)}. Check "
                "the broker (`memstream status`) and MEMSTREAM_KAFKA_BOOTSTRAP, then run the "
                "replay again (the live projection was not touched)."
            ) from exc
        finally:
            await consumer.stop()
        return Rebuilt(
            generation=target,
            live=live,
            tenant=tenant,
            messages=read,
            applied=applied,
            elapsed_s=time.monotonic() - started,
            swapped=swap,
            last_events=last_events,
            read_to=read_to,
            dead_letters=dict(unusable.by_reason),
            erased=projector.erased,
        )


def _home(topic: str, tenant: str, partitions: list[TopicPartition]) -> str:
    """The position field of the partition that holds the tenant's events."""
    return Position(topic, partition_of(tenant, len(partitions)), -1).field


async def reached_ends(consumer: AIOKafkaConsumer, ends: Mapping[TopicPartition, int]) -> bool:
    """Whether `consumer` has read every partition up to its end in `ends`."""
    for tp, end in ends.items():
        if await consumer.position(tp) < end:
            return False
    return True
