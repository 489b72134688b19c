"""The projector and sealed events: opened and applied; erased ones skipped and counted, never
dead-lettered; a key still on its way waited for; a key that never comes dead-lettered."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np

from memstream import TurnCompleted, encode_event
from memstream.errors import EventDecodeError
from memstream.memory.cipher import DataKey, InProcessKeyring
from memstream.memory.ports import AppliedOutcome, Embedded, ProjectionWriter
from memstream.streams.projector import Projector, RawMessage

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


class Embedder:
    model_id, dims = "model@1", 4

    def embed_documents(self, texts: Sequence[str]) -> Any:
        return np.ones((len(texts), self.dims), dtype=np.float32)


class Embedders:
    configured_model = Embedder.model_id

    def configured(self) -> Embedder:
        return Embedder()

    def for_model(self, model_id: str) -> Embedder:
        return Embedder()


class Generations:
    async def live(self) -> int:
        return 1

    async def model(self, generation: int) -> str:
        return Embedder.model_id


class Writer:
    def __init__(self) -> None:
        self.applied: list[Embedded] = []

    async def apply(self, batch: Sequence[Embedded], **_: object) -> list[Any]:
        self.applied += batch
        return [AppliedOutcome(item.event, True, (), ()) for item in batch]

    async def advance(self, positions: Mapping[str, int], **_: object) -> None:
        return None


class DeadLetters:
    def __init__(self) -> None:
        self.codes: list[str] = []

    async def send(self, message: RawMessage, error: EventDecodeError) -> None:
        self.codes.append(error.code)


class LateKeyring(InProcessKeyring):
    """A keyring whose keys topic receives each key only after `late` lookups missed it."""

    def __init__(self, late: int) -> None:
        super().__init__()
        self.late = late

    def lookup(self, tenant: str, key_id: str) -> DataKey:
        if self.late > 0:
            self.late -= 1
            return super().lookup(tenant, "not-there-yet")
        return super().lookup(tenant, key_id)


def sealed(keyring: InProcessKeyring, tenant: str, n: int) -> RawMessage:
    event = TurnCompleted(tenant, "t", "r", n, f"q{n}", f"a{n}", AT, 0.5, "model@1")
    return RawMessage("ns.memory", 0, n, tenant.encode(), encode_event(event, keyring))


def projector(
    keyring: InProcessKeyring, key_wait_s: float = 0.0
) -> tuple[Projector, Writer, DeadLetters]:
    writer, dead = Writer(), DeadLetters()
    made = Projector(
        Embedders(),
        cast(ProjectionWriter, writer),
        Generations(),
        dead,
        default_importance=0.5,
        keyring=keyring,
        key_wait_s=key_wait_s,
        first_retry_s=0.01,
        max_retry_s=0.02,
    )
    return made, writer, dead


def test_sealed_events_are_opened_and_erased_ones_skipped_and_counted() -> None:
    keyring = InProcessKeyring()
    messages = [sealed(keyring, "acme", 1), sealed(keyring, "globex", 2)]
    keyring.erase("acme")
    made, writer, dead = projector(keyring)
    asyncio.run(made.project(messages))
    assert [item.event.tenant for item in writer.applied] == ["globex"]
    assert made.erased == 1 and dead.codes == []


def test_a_key_on_its_way_is_waited_for() -> None:
    keyring = LateKeyring(late=2)
    made, writer, dead = projector(keyring, key_wait_s=1.0)
    asyncio.run(made.project([sealed(keyring, "acme", 1)]))
    assert len(writer.applied) == 1 and dead.codes == []


def test_a_key_that_never_comes_is_a_dead_letter_after_the_wait() -> None:
    keyring = LateKeyring(late=10_000)
    made, writer, dead = projector(keyring, key_wait_s=0.05)
    asyncio.run(made.project([sealed(keyring, "acme", 1)]))
    assert writer.applied == [] and dead.codes == ["unknown_data_key"]
