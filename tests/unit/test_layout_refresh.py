"""How a process re-reads the stored shard layout: never on a routed call's path while its
reading is less than `layout_window_s` old, and never routing by an older one."""

from __future__ import annotations

import threading
import time

import pytest

from memstream.config import Settings
from memstream.errors import ConfigurationError, InfrastructureError
from memstream.memory.ports import ShardLayout
from memstream.projections import backend
from memstream.projections.backend import RedisProjection

ONE = ShardLayout(("redis://a:6379/0",), 1)
TWO = ShardLayout(("redis://a:6379/0", "redis://b:6379/0"), 2)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class Store:
    """The stored layout; a reading waits for `open` (a slow shard 0) and is counted."""

    def __init__(self) -> None:
        self.layout: ShardLayout | None = None
        self.reads = 0
        self.open = threading.Event()
        self.open.set()
        self.fails = False

    def read(self) -> ShardLayout | None:
        self.reads += 1
        self.open.wait(10)
        if self.fails:
            raise InfrastructureError("shard 0 does not answer")
        return self.layout


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(backend, "time", fake)
    return fake


def projection(store: Store) -> RedisProjection:
    made = RedisProjection(Settings(redis_url=ONE.urls[0]), lambda tenant: 0)
    made.layouts = lambda: store  # type: ignore[assignment,return-value]
    return made


def wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


def test_the_first_call_reads_the_layout_and_later_ones_within_the_refresh_do_not(
    clock: Clock,
) -> None:
    store = Store()
    store.layout = TWO
    routed = projection(store)
    assert routed.current_layout() == TWO and store.reads == 1
    clock.now += 0.9 * routed.layout_refresh_s
    assert routed.current_layout() == TWO and store.reads == 1


def test_a_stale_reading_is_renewed_in_the_background_without_holding_the_call(
    clock: Clock,
) -> None:
    store = Store()
    routed = projection(store)
    assert routed.current_layout() == ONE  # none stored: the settings' layout
    store.layout, store.open = TWO, threading.Event()  # a reshard; shard 0 now slow
    clock.now += routed.layout_refresh_s
    # The call routes by the layout held, at once, while the reading waits on shard 0.
    assert routed.current_layout() == ONE
    wait_for(lambda: store.reads == 2, "the background reading started")
    assert routed.current_layout() == ONE and store.reads == 2  # one reading at a time
    store.open.set()
    wait_for(lambda: routed.current_layout() == TWO, "the newer layout followed")
    assert store.reads == 2


def test_a_reading_older_than_the_window_is_waited_for(clock: Clock) -> None:
    store = Store()
    routed = projection(store)
    assert routed.current_layout() == ONE
    store.layout = TWO
    clock.now += routed.layout_window_s
    assert routed.current_layout() == TWO  # a call never routes by an older reading
    assert routed.layout_window_s == 1.5 * routed.layout_refresh_s


def test_a_shard_0_that_does_not_answer_keeps_the_last_layout(clock: Clock) -> None:
    store = Store()
    store.layout = TWO
    routed = projection(store)
    assert routed.current_layout() == TWO
    store.fails = True
    clock.now += routed.layout_window_s
    assert routed.current_layout() == TWO and store.reads == 2
    clock.now += 0.5 * routed.layout_refresh_s  # tried again only a refresh later
    assert routed.current_layout() == TWO and store.reads == 2


def test_a_refused_reading_reaches_a_caller_rather_than_only_the_background(
    clock: Clock,
) -> None:
    class Refused(Store):
        def read(self) -> ShardLayout | None:
            self.reads += 1
            if self.reads > 1:
                raise ConfigurationError("the Redis user may not GET the layout")
            return None

    store = Refused()
    routed = projection(store)
    assert routed.current_layout() == ONE
    clock.now += routed.layout_refresh_s
    assert routed.current_layout() == ONE  # the background reading is refused...
    wait_for(lambda: store.reads == 2 and not routed._refreshing.locked(), "the reading ran")
    clock.now += routed.layout_window_s - routed.layout_refresh_s
    with pytest.raises(ConfigurationError, match="may not GET"):  # ...and the caller sees it
        routed.current_layout()
