"""`ready_batches` (streams/worker.py) over a real in-memory Faust stream: a backlog comes out in
order in batches of at most `max_`, the next batch gathers while one is held (being prepared),
a lone event does not wait `within`, and a batch's events are acknowledged when its `ack` is
awaited, not before."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import cast

import faust
import pytest
from faust.types import ConsumerT

from memstream.streams.worker import Batch, ready_batches

MAX = 512
WITHIN = 10.0  # far longer than any test may take: a batch that waits for it fails


class UnstartedConsumer:
    """What the stream's iterator reads of the app's consumer when it starts (the set of
    unacknowledged messages); the app's own would be an aiokafka consumer, which needs Kafka.
    A channel's events are acknowledged on their message alone."""

    def __init__(self) -> None:
        self._unacked_messages: set[object] = set()  # read by the Cython iterator
        self.unacked = self._unacked_messages  # read by the pure-Python one


@pytest.fixture
async def stream() -> AsyncIterator[faust.StreamT[bytes]]:
    """A stream over an in-memory channel of a never-started app (no Kafka)."""
    app = faust.App("ready-batches", web_enabled=False, autodiscover=False)
    app.consumer = cast(ConsumerT, UnstartedConsumer())
    app.flow_control.resume()  # suspended until an app starts: the stream would skip events
    stream: faust.StreamT[bytes] = app.stream(app.channel())
    yield stream
    await stream.stop()


def channel_of(stream: faust.StreamT[bytes]) -> faust.ChannelT[bytes]:
    return cast("faust.ChannelT[bytes]", stream.channel)  # app.stream's: a channel's clone


@contextlib.asynccontextmanager
async def batches_of(stream: faust.StreamT[bytes]) -> AsyncIterator[AsyncIterator[Batch]]:
    """`ready_batches` of the stream (up to MAX, within WITHIN), closed on the way out as the
    agent's loop is when it ends."""
    batches = ready_batches(stream, MAX, WITHIN)
    try:
        yield batches
    finally:
        await cast(AsyncGenerator[Batch, None], batches).aclose()  # an async generator


def values(start: int, stop: int) -> list[bytes]:
    return [b"%d" % i for i in range(start, stop)]


async def queue(stream: faust.StreamT[bytes], queued: Sequence[bytes]) -> None:
    for value in queued:
        await channel_of(stream).send(value=value)


async def taken(stream: faust.StreamT[bytes]) -> None:
    """Returns once the stream has taken everything queued on its channel (checked once a
    loop turn, for a bounded number of turns: each value takes about one)."""
    waiting = channel_of(stream).queue
    for _ in range(10_000):
        if waiting.empty():
            return
        await asyncio.sleep(0)
    pytest.fail(f"the stream left {waiting.qsize()} values queued")


async def prepared() -> None:
    """Holds a batch as a prepare step would: the loop runs meanwhile (a fixed number of loop
    turns, enough for the stream to take a full batch)."""
    for _ in range(2 * MAX + 100):
        await asyncio.sleep(0)


def values_of(batch: Batch) -> list[bytes]:
    return [event.value for event in batch.events]


async def test_a_backlog_comes_out_in_order_in_batches_of_at_most_max(
    stream: faust.StreamT[bytes],
) -> None:
    backlog = values(0, 1300)
    await queue(stream, backlog)
    got: list[bytes] = []
    sizes: list[int] = []
    async with asyncio.timeout(5), batches_of(stream) as batches:
        async for batch in batches:
            sizes.append(len(batch.events))
            got += values_of(batch)
            await prepared()  # the next batch gathers meanwhile, still up to MAX
            await batch.ack()
            if len(got) >= len(backlog):
                break
    assert got == backlog  # every value once, in order
    assert sizes == [MAX, MAX, len(backlog) - 2 * MAX]  # a backlog fills its batches


async def test_the_next_batch_gathers_while_one_is_held(stream: faust.StreamT[bytes]) -> None:
    await queue(stream, values(0, 3))
    async with batches_of(stream) as batches:
        async with asyncio.timeout(2):
            first = await anext(batches)
        assert values_of(first) == values(0, 3)
        # While the first batch is prepared (not yet acknowledged, the next not yet asked
        # for), more arrive: the stream takes them all, without waiting to be asked.
        meanwhile = values(3, 103)
        await queue(stream, meanwhile)
        await taken(stream)
        async with asyncio.timeout(1):  # handed over at once, nothing left to wait for
            second = await anext(batches)
        assert values_of(second) == meanwhile
        await first.ack()
        await second.ack()


async def test_a_lone_value_is_handed_over_without_waiting_within(
    stream: faust.StreamT[bytes],
) -> None:
    await queue(stream, [b"queued"])
    async with batches_of(stream) as batches:
        async with asyncio.timeout(2):
            first = await anext(batches)
        assert values_of(first) == [b"queued"]
        await first.ack()
        # The same for one that arrives while the batches wait, idle.
        asking = asyncio.ensure_future(anext(batches))
        await prepared()
        assert not asking.done()
        await queue(stream, [b"arrived"])
        async with asyncio.timeout(2):
            second = await asking
        assert values_of(second) == [b"arrived"]
        await second.ack()


async def test_a_batchs_events_are_acknowledged_when_its_ack_is_awaited(
    stream: faust.StreamT[bytes],
) -> None:
    await queue(stream, values(0, 10))
    async with batches_of(stream) as batches:
        async with asyncio.timeout(2):
            batch = await anext(batches)
        assert values_of(batch) == values(0, 10)
        assert not any(event.message.acked for event in batch.events)  # not when handed over
        await batch.ack()
        assert all(event.message.acked for event in batch.events)
    assert stream.enable_acks  # closed, the batches leave the stream acknowledging again


async def test_an_error_in_the_streams_iteration_ends_the_batches_with_it(
    stream: faust.StreamT[bytes],
) -> None:
    # Faust's drainer throws such an error into the stream's channel and ends; the stream an
    # agent started (not its iterator) is not stopped by it, and nothing else reads the
    # channel: the batches waited for ever, the worker alive and projecting nothing.
    def failing(value: bytes) -> bytes:
        if value == b"ack failed":
            raise ValueError(value)
        return value

    await stream.start()  # as the agent starts it, before iterating
    stream.add_processor(failing)
    batches = ready_batches(stream, MAX, 0.01)
    try:
        await queue(stream, [b"1"])
        assert [e.value for e in (await anext(batches)).events] == [b"1"]
        await queue(stream, [b"ack failed", b"2"])
        with pytest.raises(RuntimeError, match="stopped delivering") as failed:
            await asyncio.wait_for(anext(batches), WITHIN)
        assert isinstance(failed.value.__cause__, ValueError)
    finally:
        await cast(AsyncGenerator[Batch, None], batches).aclose()


async def test_a_stream_ended_by_a_stop_ends_the_batches_without_an_error(
    stream: faust.StreamT[bytes],
) -> None:
    await stream.start()  # as the agent starts it, before iterating
    batches = ready_batches(stream, MAX, 0.01)
    try:
        await queue(stream, [b"1"])
        assert [e.value for e in (await anext(batches)).events] == [b"1"]
        # A worker's shutdown ends the drainer's iteration before the stream is stopped, and
        # throws the end of an iteration into the channel once more, unread (seen in a log).
        channel_of(stream).queue._throw(StopAsyncIteration())
        await taken(stream)
        channel_of(stream).queue._throw(StopAsyncIteration())
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(anext(batches), WITHIN)
    finally:
        await cast(AsyncGenerator[Batch, None], batches).aclose()
