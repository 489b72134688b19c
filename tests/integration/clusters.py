"""A replicated local cluster of a test module's own (`memstream up --brokers 3 --shards 3`),
on free ports and in a temporary state folder, so that killing one of its brokers or shards
never touches the suite's shared stack; and what the fault tests read of it."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from memstream import Settings
from memstream.cli.stack import LocalStack
from memstream.deployment import Deployment
from memstream.processes import port_free, quiet_port
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import partition_leaders
from memstream.topology import PORT_STRIDE

from .helpers import TestStack, wait_until

__all__ = ["active_controller", "cluster_ports", "in_sync", "local_cluster", "projecting"]

# The stack's address settings: the cluster's own replace them (found through its topology).
_SERVERS = ("MEMSTREAM_KAFKA_BOOTSTRAP", "MEMSTREAM_REDIS_URL", "MEMSTREAM_STATE_DIR")
# A JVM's start on the busy shared machine.
_SLOW_S = 180.0
_BECAME_ACTIVE = re.compile(
    r"\[QuorumController id=(\d+)\] Becoming the active controller at epoch (\d+)"
)


def cluster_ports(brokers: int, shards: int = 1) -> dict[str, str]:
    """Base ports whose brokers', controllers' and Redis shards' siblings (memstream.topology's
    rule) are free too."""
    span = PORT_STRIDE * max(brokers, shards)
    while True:
        # Below the ephemeral range: a killed broker or shard restarts on its port.
        kafka, controller, redis = quiet_port(span), quiet_port(span), quiet_port(span)
        ports = [base + PORT_STRIDE * i for base in (kafka, controller) for i in range(brokers)]
        ports += [redis + PORT_STRIDE * i for i in range(shards)]
        if len(set(ports)) == len(ports) and all(map(port_free, ports)):
            return {
                "MEMSTREAM_KAFKA_PORT": str(kafka),
                "MEMSTREAM_KAFKA_CONTROLLER_PORT": str(controller),
                "MEMSTREAM_REDIS_PORT": str(redis),
            }


@contextlib.contextmanager
def local_cluster(
    env: dict[str, str], state: Path, brokers: int, shards: int, **settings: str
) -> Iterator[tuple[dict[str, str], LocalStack]]:
    """`brokers` brokers and `shards` Redis shards in `state`, up for the block, and the
    settings that reach them: only the state folder, as on a machine after `memstream up`."""
    own = {key: value for key, value in env.items() if key not in _SERVERS}
    own |= cluster_ports(brokers, shards) | {"MEMSTREAM_STATE_DIR": str(state)} | settings
    stack = LocalStack(Settings.from_env(own))
    try:
        stack.up(brokers=brokers, shards=shards, say=lambda _: None)
        yield own, stack
    finally:
        stack.down(say=lambda _: None)


def active_controller(state: Path) -> int:
    """The node id of the KRaft quorum's active controller, as the brokers' logs last said
    (the highest epoch any of them became active in)."""
    latest: tuple[int, int] | None = None
    for log in state.glob("kafka-*.log"):
        for match in _BECAME_ACTIVE.finditer(log.read_text(errors="replace")):
            node, epoch = int(match[1]), int(match[2])
            if latest is None or epoch > latest[0]:
                latest = (epoch, node)
    assert latest is not None, "no broker has logged becoming the active controller"
    return latest[1]


def in_sync(kafka: KafkaConnection, topic: str, brokers: int) -> None:
    """Wait until every partition of `topic` has all `brokers` replicas in sync (a restarted
    broker has caught up)."""
    wait_until(
        lambda: (
            (now := asyncio.run(partition_leaders(kafka, topic))) != {}
            and all(isr == brokers for _, isr in now.values())
        ),
        "the restarted broker to rejoin every partition's in-sync replicas",
        timeout=_SLOW_S,
    )


def projecting(deployment: Deployment, worker: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until `worker` projects the deployment's namespace (a probe event applied)."""
    probe = TestStack(deployment.settings).turn("__probe__", "is the worker up?", "yes")

    async def publish() -> None:
        await deployment.ensure_topics()
        async with deployment.event_publisher() as publisher:
            await publisher.publish([probe])

    asyncio.run(publish())
    status = deployment.status()

    def applied() -> bool:
        assert worker.poll() is None, f"the worker exited:\n{log.read_text()[-3000:]}"
        return not status.unapplied([probe])

    wait_until(applied, "the worker to project", _SLOW_S)
