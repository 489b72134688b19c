"""The write path's coalesced tombstone check (server/tombstones.py) over a fake reader: who is
asked what, when, and who gets which answer."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping

import pytest

from memstream.errors import RedisUnavailableError
from memstream.server.tombstones import TombstoneChecks


class FakeReader:
    """Tombstones by tenant, read when a read begins (as Redis answers what it held when the
    command arrived); each read is recorded, and held until the test opens the gate."""

    def __init__(self, tombstones: dict[str, set[str]]) -> None:
        self.tombstones = tombstones
        self.reads: list[dict[str, set[str]]] = []
        self.gate = asyncio.Event()
        self.down: set[str] = set()  # tenants whose shard does not answer

    async def forgotten(
        self, asked: Mapping[str, Collection[str]]
    ) -> dict[str, set[str] | Exception]:
        self.reads.append({tenant: set(ids) for tenant, ids in asked.items()})
        answer: dict[str, set[str] | Exception] = {
            tenant: RedisUnavailableError(f"{tenant}'s shard is down")
            if tenant in self.down
            else set(ids) & self.tombstones.get(tenant, set())
            for tenant, ids in asked.items()
        }
        await self.gate.wait()
        return answer

    async def aclose(self) -> None:
        pass


async def settled() -> None:
    """Lets every ready task run to its next wait (no timing: a fixed number of loop turns)."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_concurrent_checks_share_one_read_and_each_gets_only_its_own_ids() -> None:
    reader = FakeReader({"a": {"x1", "x3"}, "b": {"y1"}})
    checks = TombstoneChecks(reader)
    asked = [
        asyncio.create_task(checks.forgotten("a", ["x1", "x2"])),
        asyncio.create_task(checks.forgotten("a", ["x3"])),
        asyncio.create_task(checks.forgotten("b", ["y1", "y2"])),
        asyncio.create_task(checks.forgotten("a", ["x4"])),
    ]
    await settled()
    reader.gate.set()
    answers = await asyncio.gather(*asked)
    assert reader.reads == [{"a": {"x1", "x2", "x3", "x4"}, "b": {"y1", "y2"}}]
    assert answers == [{"x1"}, {"x3"}, {"y1"}, set()]


async def test_a_check_asked_during_a_read_is_answered_by_a_read_that_began_after_it() -> None:
    """A delete applied while a read is out must be seen by a check asked after it: that
    check waits for the next read instead of taking the one already under way."""
    reader = FakeReader({})
    checks = TombstoneChecks(reader)
    first = asyncio.create_task(checks.forgotten("a", ["x1"]))
    await settled()
    assert len(reader.reads) == 1  # out, and held
    reader.tombstones["a"] = {"x1"}  # the projection applies a delete meanwhile
    second = asyncio.create_task(checks.forgotten("a", ["x1"]))
    await settled()
    assert len(reader.reads) == 1  # the second waits for the first read to come back
    reader.gate.set()
    assert await first == set()  # read before the delete
    assert await second == {"x1"}
    assert len(reader.reads) == 2


async def test_an_unreadable_shard_fails_only_its_own_tenants_checks() -> None:
    reader = FakeReader({"b": {"y1"}})
    reader.down = {"a"}
    checks = TombstoneChecks(reader)
    a = asyncio.create_task(checks.forgotten("a", ["x1"]))
    b = asyncio.create_task(checks.forgotten("b", ["y1"]))
    await settled()
    reader.gate.set()
    with pytest.raises(RedisUnavailableError, match="a's shard is down"):
        await a
    assert await b == {"y1"}


async def test_a_reader_that_raises_fails_every_check_of_its_read_and_the_next_read_runs() -> None:
    reader = FakeReader({"a": {"x1"}})
    checks = TombstoneChecks(reader)

    async def broken(asked: Mapping[str, Collection[str]]) -> dict[str, set[str] | Exception]:
        raise RedisUnavailableError("Redis did not answer")

    reader.forgotten = broken  # type: ignore[method-assign]
    with pytest.raises(RedisUnavailableError, match="did not answer"):
        await checks.forgotten("a", ["x1"])
    del reader.forgotten  # the class's again
    reader.gate.set()
    assert await checks.forgotten("a", ["x1"]) == {"x1"}


async def test_a_cancelled_request_leaves_the_others_their_answers() -> None:
    reader = FakeReader({"a": {"x1"}})
    checks = TombstoneChecks(reader)
    gone = asyncio.create_task(checks.forgotten("a", ["x1"]))
    kept = asyncio.create_task(checks.forgotten("a", ["x1", "x2"]))
    await settled()
    gone.cancel()
    await settled()
    reader.gate.set()
    assert await kept == {"x1"}
    assert gone.cancelled()


async def test_no_ids_asks_nothing() -> None:
    reader = FakeReader({})
    assert await TombstoneChecks(reader).forgotten("a", []) == set()
    assert reader.reads == []
