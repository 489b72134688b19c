"""Overlapping: a batch is prepared while the one before is applied, and applied after it; a
batch that fails is raised at the next step and told at once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from memstream.memory.ports import AppliedOutcome
from memstream.streams.projector import Overlapping, Prepared, RawMessage


def _batch(n: int) -> list[RawMessage]:
    return [RawMessage("t.memory", 0, n, b"acme", b"{}")]


class _Steps:
    """Records each step; a commit waits until the test opens its gate."""

    def __init__(self, failing: int | None = None) -> None:
        self.log: list[str] = []
        self.gates: dict[int, asyncio.Event] = {}
        self.prepared: dict[int, asyncio.Event] = {n: asyncio.Event() for n in (1, 2)}
        self.failing = failing

    async def prepare(self, messages: Sequence[RawMessage]) -> Prepared:
        n = messages[0].offset
        self.log.append(f"prepare {n}")
        self.gates[n] = asyncio.Event()
        self.prepared[n].set()
        return Prepared(tuple(messages), (), {}, (), 0)

    async def commit(self, prepared: Prepared) -> list[AppliedOutcome]:
        n = prepared.messages[0].offset
        self.log.append(f"commit {n} starts")
        await self.gates[n].wait()
        if n == self.failing:
            raise RuntimeError(f"batch {n} failed")
        self.log.append(f"commit {n} ends")
        return []


def test_the_next_batch_is_prepared_while_the_last_is_applied_and_applied_after_it() -> None:
    async def run() -> list[str]:
        steps = _Steps()
        async with Overlapping(steps) as overlapping:

            async def then(outcomes: list[AppliedOutcome]) -> None:
                steps.log.append("then")

            await overlapping.project(_batch(1), then)
            await asyncio.sleep(0)  # the first commit starts and waits at its gate
            preparing = asyncio.create_task(overlapping.project(_batch(2)))
            await steps.prepared[2].wait()
            assert "commit 1 ends" not in steps.log  # prepared while 1 is applied
            assert not preparing.done()  # 2 is handed on only after 1 is applied
            steps.gates[1].set()
            await preparing
            steps.gates[2].set()
        return steps.log

    log = asyncio.run(run())
    assert log == [
        "prepare 1",
        "commit 1 starts",
        "prepare 2",
        "commit 1 ends",
        "then",
        "commit 2 starts",
        "commit 2 ends",
    ]


def test_a_failed_apply_is_raised_and_the_batch_after_it_never_applied() -> None:
    async def run(steps: _Steps) -> None:
        async with Overlapping(steps) as overlapping:
            await overlapping.project(_batch(1))
            steps.gates[1].set()
            await overlapping.project(_batch(2))

    steps = _Steps(failing=1)
    with pytest.raises(RuntimeError, match="batch 1 failed"):
        asyncio.run(run(steps))
    assert "commit 2 starts" not in steps.log


def test_leaving_on_an_error_cancels_the_batch_being_applied() -> None:
    async def run(steps: _Steps) -> None:
        async with Overlapping(steps) as overlapping:
            await overlapping.project(_batch(1))
            await asyncio.sleep(0)  # its commit starts and waits at its gate
            raise ValueError("given up")

    steps = _Steps()
    with pytest.raises(ValueError, match="given up"):
        asyncio.run(run(steps))
    assert steps.log == ["prepare 1", "commit 1 starts"]  # never ended: cancelled at its gate


def test_a_failed_apply_is_told_at_once_while_no_next_batch_comes() -> None:
    # The live worker waits for its next batch on a quiet log: a failure seen only then was
    # never seen (the worker sat alive and idle); `failed` hears of it as it happens.
    told: list[str] = []

    async def run(steps: _Steps) -> None:
        heard = asyncio.Event()

        async def failed(error: BaseException) -> None:
            told.append(str(error))
            heard.set()

        async with Overlapping(steps, failed=failed) as overlapping:
            await overlapping.project(_batch(1))
            steps.gates[1].set()
            await asyncio.wait_for(heard.wait(), 30)  # no next batch, no drain: told anyway

    with pytest.raises(RuntimeError, match="batch 1 failed"):  # and raised on leaving
        asyncio.run(run(_Steps(failing=1)))
    assert told == ["batch 1 failed"]


def test_a_batch_that_succeeds_tells_nothing() -> None:
    async def run(steps: _Steps) -> list[BaseException]:
        told: list[BaseException] = []

        async def failed(error: BaseException) -> None:
            told.append(error)

        async with Overlapping(steps, failed=failed) as overlapping:
            await overlapping.project(_batch(1))
            steps.gates[1].set()
        return told

    assert asyncio.run(run(_Steps())) == []
