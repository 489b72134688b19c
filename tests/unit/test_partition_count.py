"""`Deployment.partition_of` asks the broker for the memory topic's partition count once when
the topic exists, and at most once a second while it does not (no metadata call per call)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memstream import Settings, deployment
from memstream.deployment import Deployment
from memstream.streams.kafka import KafkaConnection
from memstream.streams.wire import partition_of


class FakeBroker:
    """The memory topic's partitions as the broker describes them, and how often it was asked."""

    def __init__(self) -> None:
        self.partitions: Sequence[int] = ()
        self.asked = 0

    async def topic_partitions(self, kafka: KafkaConnection, topic: str) -> Sequence[int]:
        self.asked += 1
        return self.partitions


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> FakeBroker:
    fake = FakeBroker()
    monkeypatch.setattr(deployment, "topic_partitions", fake.topic_partitions)
    return fake


def test_an_absent_topic_is_asked_again_at_most_once_a_second(
    broker: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(deployment.time, "monotonic", lambda: now[0])
    routed = Deployment(Settings(partitions=6))
    for n in range(50):
        assert routed.partition_of(f"t{n}") == partition_of(f"t{n}", 6)
    assert broker.asked == 1
    broker.partitions = tuple(range(12))  # created meanwhile, by a process with 12
    now[0] += 0.5
    routed.partition_of("t")
    assert broker.asked == 1
    now[0] += 0.6
    assert routed.partition_of("t") == partition_of("t", 12)
    for n in range(50):
        assert routed.partition_of(f"t{n}") == partition_of(f"t{n}", 12)
    assert broker.asked == 2  # found: read once, kept
