"""`streams.admin`: a request meant for any broker goes to one that answers, the brokers that
failed last go last, a call is retried while the errors are retriable and then fails saying
which brokers were not reached and why. aiokafka's network client is replaced by a fake
cluster whose dead nodes refuse as aiokafka does (NodeNotReadyError)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from aiokafka.errors import NodeNotReadyError, TopicAuthorizationFailedError

from memstream.errors import KafkaUnavailableError
from memstream.streams import admin as admin_module
from memstream.streams.admin import KafkaAdmin, until_settled
from memstream.streams.kafka import KafkaConnection


@dataclass(frozen=True, slots=True)
class _Node:
    nodeId: int
    host: str
    port: int


@dataclass
class FakeCluster:
    """aiokafka's client as the admin client uses it: the metadata's brokers and `send`."""

    dead: set[int] = field(default_factory=set)
    controller: _Node | None = None
    sent: list[int] = field(default_factory=list)
    refreshed: int = 0

    @property
    def cluster(self) -> FakeCluster:
        return self

    def brokers(self) -> list[_Node]:
        return [_Node(node, "127.0.0.1", 9092 + 100 * (node - 1)) for node in (1, 2, 3)]

    def broker_metadata(self, node: int) -> _Node | None:
        return next((b for b in self.brokers() if b.nodeId == node), None)

    async def send(self, node: int, request: object) -> str:
        self.sent.append(node)
        if node in self.dead:
            raise NodeNotReadyError(
                f"Attempt to send a request to node which is not ready ({node})"
            )
        return f"answered by {node}"

    async def force_metadata_update(self) -> bool:
        self.refreshed += 1
        return True


BOOTSTRAP = "127.0.0.1:9092,127.0.0.1:9192,127.0.0.1:9292"


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_module, "_BACKOFF_S", 0.01)


def on(fake: FakeCluster) -> KafkaAdmin:
    """An admin client on the fake cluster (made in a running loop, as aiokafka wants)."""
    admin = KafkaAdmin(KafkaConnection(BOOTSTRAP), "check the topics", deadline_s=0.2)
    admin._client._client = fake
    return admin


def test_a_request_for_any_broker_skips_a_dead_one_and_asks_it_last_next_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeCluster(dead={2})
    # The order is shuffled: here the dead node always comes first, unless it failed before.
    monkeypatch.setattr(admin_module.random, "shuffle", lambda nodes: nodes.sort(key=(2).__ne__))

    async def scenario() -> list[object]:
        admin = on(fake)
        return [
            await admin.call("ask", lambda client: client._send_request(object())) for _ in range(5)
        ]

    assert asyncio.run(scenario()) == ["answered by 1"] * 5
    assert fake.sent == [2, 1, 1, 1, 1, 1]  # once refused, it goes last: not asked again


def test_a_controller_request_goes_to_the_named_controller_first_then_any_broker() -> None:
    fake = FakeCluster(controller=_Node(3, "127.0.0.1", 9292))

    async def scenario() -> tuple[object, object]:
        admin = on(fake)
        alive = await admin.call("create", lambda client: client._send_to_controller(object()))
        fake.dead = {3}  # the controller died: any broker forwards to the new one (KRaft)
        dead = await admin.call("create", lambda client: client._send_to_controller(object()))
        return alive, dead

    alive, dead = asyncio.run(scenario())
    assert alive == "answered by 3"
    assert dead in ("answered by 1", "answered by 2")
    assert fake.sent[:2] == [3, 3]


def test_a_cluster_that_does_not_settle_fails_naming_the_brokers_not_reached() -> None:
    fake = FakeCluster(dead={1, 2, 3})

    async def scenario() -> None:
        await on(fake).call("list the topics", lambda client: client._send_request(object()))

    with pytest.raises(KafkaUnavailableError) as failed:
        asyncio.run(scenario())
    message = str(failed.value)
    assert message.startswith(
        f"could not check the topics on Kafka at {BOOTSTRAP} over PLAINTEXT: list the topics "
        "failed for 0s: NodeNotReadyError"  # the deadline, rounded
    )
    for port in (9092, 9192, 9292):
        assert f"127.0.0.1:{port} (NodeNotReadyError" in message
    assert fake.refreshed >= 1  # asked what the cluster looks like between tries
    assert len(fake.sent) > 3  # tried again, not once


def test_until_settled_retries_what_kafka_calls_retriable_and_nothing_else() -> None:
    calls: list[int] = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise NodeNotReadyError("a broker is down")
        return "done"

    assert asyncio.run(until_settled(flaky, deadline_s=5)) == "done"
    assert len(calls) == 3

    async def refused() -> str:
        calls.append(1)
        raise TopicAuthorizationFailedError("not allowed")

    calls.clear()
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(until_settled(refused, deadline_s=5))
    assert len(calls) == 1  # an answer, not a fault: never retried

    async def down() -> str:
        calls.append(1)
        raise NodeNotReadyError("still down")

    calls.clear()
    with pytest.raises(NodeNotReadyError):
        asyncio.run(until_settled(down, deadline_s=0.05))
    assert len(calls) >= 2
