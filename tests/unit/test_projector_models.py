"""The projector embeds for the generation it writes, never for the model an event names; when
a swap retires that generation mid-batch (or between batches: the projector holds the live
generation as last read), the rest is embedded again for the new one. Positions are recorded
apart only where applying did not already move them. An event whose effects cannot be built is
a dead letter, alone."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np
import pytest

from memstream import TurnCompleted, encode_event
from memstream.errors import ConfigurationError, EventDecodeError
from memstream.memory.embeddings import Embedder, Vectors
from memstream.memory.ports import AppliedOutcome, Embedded, ProjectionWriter
from memstream.streams import projector as projector_module
from memstream.streams.projector import Projector, RawMessage

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


class Model:
    def __init__(self, model_id: str, value: float) -> None:
        self.model_id, self.dims, self.value = model_id, 2, value

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return np.full((len(texts), self.dims), self.value, dtype=np.float32)

    def embed_query(self, text: str) -> Vectors:
        return np.full(self.dims, self.value, dtype=np.float32)


class Catalogue:
    configured_model = "new@2"

    def __init__(self) -> None:
        self.models = {"old@1": Model("old@1", 1.0), "new@2": Model("new@2", 2.0)}

    def configured(self) -> Embedder:
        return self.models[self.configured_model]

    def for_model(self, model_id: str) -> Embedder:
        if model_id not in self.models:
            raise ConfigurationError(f"cannot make {model_id}")
        return self.models[model_id]


class Generations:
    def __init__(self, models: dict[int, str], live: int) -> None:
        self.models, self.now = models, live
        self.reads = 0

    async def live(self) -> int:
        self.reads += 1
        return self.now

    async def model(self, generation: int) -> str | None:
        return self.models.get(generation)


class Writer:
    """Applies to `while_live` until `retire_after` events, then a swap retires it; like the
    apply script, refuses a `while_live` that is no longer live."""

    def __init__(self, generations: Generations, retire_after: int | None = None) -> None:
        self.generations = generations
        self.retire_after = retire_after
        self.applied: list[tuple[int, Embedded]] = []
        self.advanced: list[dict[str, int]] = []

    async def apply(
        self,
        batch: Sequence[Embedded],
        *,
        into: int | None = None,
        while_live: int | None = None,
        follows: Mapping[str, int] | None = None,
    ) -> list[AppliedOutcome]:
        generation = into if into is not None else while_live
        assert generation is not None
        if into is None and generation != self.generations.now:
            return []
        done = []
        for item in batch:
            if self.retire_after is not None and len(self.applied) == self.retire_after:
                self.retire_after = None
                self.generations.now = 2  # the replay swapped generation 2 in
                break
            self.applied.append((generation, item))
            done.append(AppliedOutcome(item.event, True, (), ()))
        return done

    async def advance(self, positions: Mapping[str, int], **_: object) -> None:
        self.advanced.append(dict(positions))

    async def ensure_live_index(self, model: str, dims: int) -> int:
        return await self.generations.live()


class DeadLetters:
    def __init__(self) -> None:
        self.sent: list[RawMessage] = []
        self.codes: list[str] = []

    async def send(self, message: RawMessage, error: EventDecodeError) -> None:
        self.sent.append(message)
        self.codes.append(error.code)


def turns(n: int, model: str) -> list[RawMessage]:
    events = [
        TurnCompleted("acme", "t", "r", i, f"q{i}", f"a{i}", AT, 0.5, model) for i in range(n)
    ]
    return [RawMessage("ns.memory", 0, i, b"acme", encode_event(e)) for i, e in enumerate(events)]


def projector(
    writer: Writer, generations: Generations, dead_letters: DeadLetters | None = None
) -> Projector:
    return Projector(
        Catalogue(),
        cast(ProjectionWriter, writer),
        cast(Any, generations),
        dead_letters or DeadLetters(),
        default_importance=0.5,
    )


def test_events_naming_any_model_are_embedded_with_the_live_generations_model() -> None:
    generations = Generations({1: "old@1"}, live=1)
    writer = Writer(generations)
    made = projector(writer, generations)
    asyncio.run(made.project([*turns(2, "new@2"), *turns(1, "someone-elses@9")]))
    assert [g for g, _ in writer.applied] == [1, 1, 1]
    for _, item in writer.applied:
        assert {m.embedding_model for m in item.memories} == {"old@1"}
        assert np.all(item.vectors == 1.0)


def test_a_swap_mid_batch_embeds_the_rest_again_for_the_new_generations_model() -> None:
    generations = Generations({1: "old@1", 2: "new@2"}, live=1)
    writer = Writer(generations, retire_after=2)
    outcomes = asyncio.run(projector(writer, generations).project(turns(5, "old@1")))
    assert len(outcomes) == 5
    assert [g for g, _ in writer.applied] == [1, 1, 2, 2, 2]
    assert [float(item.vectors[0][0]) for _, item in writer.applied] == [1, 1, 2, 2, 2]
    assert [item.memories[0].embedding_model for _, item in writer.applied][2:] == ["new@2"] * 3


def test_a_generation_of_a_model_this_process_cannot_make_fails_at_start() -> None:
    generations = Generations({1: "remote@3"}, live=1)
    with pytest.raises(ConfigurationError, match="remote@3"):
        asyncio.run(projector(Writer(generations), generations).start())


def test_a_generation_without_an_index_is_built_with_the_configured_model() -> None:
    generations = Generations({}, live=1)
    writer = Writer(generations)
    asyncio.run(projector(writer, generations).project(turns(1, "old@1")))
    ((_, item),) = writer.applied
    assert item.memories[0].embedding_model == "new@2"


def test_a_swap_between_batches_is_learnt_from_the_refusal_and_the_batch_embedded_again() -> None:
    generations = Generations({1: "old@1", 2: "new@2"}, live=1)
    writer = Writer(generations)
    made = projector(writer, generations)
    asyncio.run(made.project(turns(2, "old@1")))
    asyncio.run(made.project(turns(2, "old@1")))
    assert generations.reads == 1  # held, not read again before every batch
    generations.now = 2  # a replay swapped generation 2 in
    asyncio.run(made.project(turns(3, "old@1")))
    assert [g for g, _ in writer.applied] == [1, 1, 1, 1, 2, 2, 2]
    assert [float(item.vectors[0][0]) for _, item in writer.applied][4:] == [2, 2, 2]
    assert generations.reads == 2


def test_positions_are_recorded_apart_only_where_the_last_message_was_not_applied() -> None:
    generations = Generations({1: "old@1"}, live=1)
    writer, junk = Writer(generations), DeadLetters()
    made = projector(writer, generations, junk)
    asyncio.run(made.project(turns(3, "old@1")))
    assert writer.advanced == []  # applying the last event moved the position there
    tail = RawMessage("ns.memory", 0, 3, b"acme", b"{not json")
    asyncio.run(made.project([*turns(3, "old@1"), tail]))
    assert [m.offset for m in junk.sent] == [3]
    assert writer.advanced == [{"ns.memory/0": 3}]  # over the dead letter


def test_an_event_whose_effects_cannot_be_built_is_a_dead_letter_and_the_rest_applied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Whatever the defect (a summary of a view without groups once named a document with no
    # key, which failed the whole batch in Redis's apply on every try and stopped the worker),
    # the one event goes to the dead letters and the batch goes on.
    real = projector_module.memories_of

    def memories_of(event: Any) -> Any:
        if getattr(event, "turn", None) == 1:
            raise ValueError("a document put needs a key")
        return real(event)

    monkeypatch.setattr(projector_module, "memories_of", memories_of)
    generations = Generations({1: "old@1"}, live=1)
    writer, junk = Writer(generations), DeadLetters()
    asyncio.run(projector(writer, generations, junk).project(turns(3, "old@1")))
    assert [m.offset for m in junk.sent] == [1] and junk.codes == ["event_unusable"]
    assert [item.event.turn for _, item in writer.applied] == [0, 2]  # type: ignore[attr-defined]
