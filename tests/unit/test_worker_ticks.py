"""A worker's timers ride out outages: a step that meets Kafka or a Redis shard down is logged
and tried at the next tick, where Faust crashed the whole worker on a timer's exception (a
summary view's refresh meeting a shard's restart, in `bench chaos`). Anything else, a defect,
still surfaces."""

from __future__ import annotations

import asyncio
import logging

import pytest

from memstream.errors import KafkaUnavailableError, RedisUnavailableError
from memstream.streams.worker import tick


async def _failing(error: Exception) -> None:
    raise error


@pytest.mark.parametrize(
    "outage",
    [RedisUnavailableError("Redis at redis://x did not answer"), KafkaUnavailableError("gone")],
)
def test_an_outage_in_a_timers_step_is_logged_and_the_worker_goes_on(
    outage: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="memstream.streams.worker"):
        asyncio.run(tick("refreshing summary views", _failing(outage)))
    assert "refreshing summary views failed; the next tick tries again" in caplog.text
    assert str(outage) in caplog.text


def test_a_defect_in_a_timers_step_still_raises() -> None:
    with pytest.raises(ValueError, match="a defect"):
        asyncio.run(tick("consolidating", _failing(ValueError("a defect"))))
