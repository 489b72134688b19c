"""The Kafka topics of one namespace, their partitions and configs, and their creation.

    {ns}.memory        the domain log: every memory event, key = tenant id, kept forever.
                       Per-tenant order comes from the key; the projection can always be
                       rebuilt by replaying it from the start.
    {ns}.dead-letters  messages the projector could not use, byte for byte, with the reason
                       in their headers; kept forever so nothing is lost silently.
    {ns}.monitoring    operational events (DeadLettered, Skipped, ...), kept a week.
    {ns}.keys          tenants' data keys, wrapped (streams.data_keys), compacted: a destroyed
                       key is physically gone once the cleaner has run (KEYS_CONFIG).

Topics are created explicitly (the local broker has auto-creation off), idempotently, each
with min(3, brokers) replicas and, where there are three, `min.insync.replicas=2`: an
acknowledged write (every producer sends acks=all) is then on two brokers, and one broker may
die without losing it or stopping writes (`replication`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from memstream.errors import KafkaUnavailableError
from memstream.streams.admin import KafkaAdmin, until_settled
from memstream.streams.kafka import RIDE_OUT_S, KafkaConnection

__all__ = [
    "KEYS_CONFIG",
    "BrokerReport",
    "ClusterReport",
    "TopicSpec",
    "Topics",
    "cluster_report",
    "end_offsets",
    "ensure_topics",
    "replication",
    "topic_partitions",
]

_FOREVER = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}
_WEEK_MS = str(7 * 24 * 3600 * 1000)
_HOUR_MS = str(3600 * 1000)
# How soon an erased tenant's wrapped key leaves the broker's disks (docs/erasure.md): its
# tombstone must first leave the active segment (rolled on the first write after segment.ms),
# then the cleaner rewrites the segment without the key (at once: any dirty ratio qualifies,
# and max.compaction.lag.ms forces it within the hour whatever the ratio), and the old segment
# file is deleted file.delete.delay.ms later. Tombstones themselves (no secret) are kept a day
# (delete.retention.ms) so that a reader offline meanwhile still sees the key go.
KEYS_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": _HOUR_MS,
    "min.cleanable.dirty.ratio": "0.01",
    "max.compaction.lag.ms": _HOUR_MS,
    "delete.retention.ms": str(24 * 3600 * 1000),
    "file.delete.delay.ms": "60000",
}


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Topics:
    namespace: str
    partitions: int = 4

    @property
    def memory(self) -> str:
        return f"{self.namespace}.memory"

    @property
    def dead_letters(self) -> str:
        return f"{self.namespace}.dead-letters"

    @property
    def monitoring(self) -> str:
        return f"{self.namespace}.monitoring"

    @property
    def worker_group(self) -> str:
        """The workers' consumer group: the Faust app's id."""
        return f"{self.namespace}-projector"

    @property
    def job_groups(self) -> tuple[str, str]:
        """The consumer groups of the jobs that follow the memory topic beside the workers'
        (streams.follower): extraction's and the summary views'."""
        return f"{self.worker_group}.extract", f"{self.worker_group}.summaries"

    @property
    def keys(self) -> str:
        return f"{self.namespace}.keys"

    @property
    def keys_group(self) -> str:
        """The group id the keys topic's readers give librdkafka: they never join or commit."""
        return f"{self.namespace}-keys"

    def specs(self) -> tuple[TopicSpec, ...]:
        return (
            TopicSpec(self.memory, self.partitions, _FOREVER),
            TopicSpec(self.dead_letters, 1, _FOREVER),
            TopicSpec(self.monitoring, 1, {"retention.ms": _WEEK_MS}),
            # One partition: every reader sees a tenant's keys in the same order.
            TopicSpec(self.keys, 1, KEYS_CONFIG),
        )


def replication(brokers: int) -> tuple[int, int]:
    """(replicas, min.insync.replicas) of a topic on a cluster of `brokers`: min(3, brokers)
    replicas, 2 of them in sync where there are 3 (so one broker may be down), else 1."""
    replicas = min(3, brokers)
    return replicas, 2 if replicas >= 3 else 1


async def ensure_topics(kafka: KafkaConnection, topics: Topics) -> list[str]:
    """Create whichever of the namespace's topics are missing, replicated for the brokers the
    cluster has now (`replication`); return the names created. Where they all exist this is
    one metadata request, which any broker that answers serves (`KafkaAdmin`)."""
    async with KafkaAdmin(kafka, "create memstream's topics") as admin:
        existing = set(await admin.call("list the topics", lambda client: client.list_topics()))
        missing = [spec for spec in topics.specs() if spec.name not in existing]
        if missing:
            cluster = await admin.call(
                "describe the cluster", lambda client: client.describe_cluster()
            )
            replicas, min_isr = replication(len(cluster["brokers"]))
            new = [
                NewTopic(
                    spec.name,
                    spec.partitions,
                    replicas,
                    topic_configs={**spec.config, "min.insync.replicas": str(min_isr)},
                )
                for spec in missing
            ]

            async def create(client: AIOKafkaAdminClient) -> None:
                response = await client.create_topics(new)
                for topic, code, *message in response.topic_errors:
                    # Another process, or this call's earlier try, created it: the goal is
                    # reached all the same.
                    if code and code != TopicAlreadyExistsError.errno:
                        raise for_code(code)(f"{topic}: {message[0] if message else ''}")

            names = ", ".join(spec.name for spec in missing)
            await admin.call(f"create the topics {names}", create)
        return [spec.name for spec in missing]


async def topic_partitions(kafka: KafkaConnection, topic: str) -> list[TopicPartition]:
    """The partitions of `topic` as the broker knows them now ([] if it does not exist)."""
    described = await _described(kafka, topic, RIDE_OUT_S)
    return [TopicPartition(topic, p["partition"]) for p in described["partitions"]]


async def partition_leaders(kafka: KafkaConnection, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (its leader's node id, how many replicas are in sync) as the cluster
    reports them now; {} when it cannot tell within a few seconds. The fault tests and `bench
    scale` watch a failover with it."""
    try:
        described = await _described(kafka, topic, 5.0)
    except KafkaUnavailableError:
        return {}
    return {p["partition"]: (p["leader"], len(p["isr"])) for p in described["partitions"]}


@dataclass(frozen=True, slots=True)
class BrokerReport:
    """One broker as the cluster reports it: its node id, address, whether it is the
    controller, and how many of the memory topic's partitions it leads and holds a replica of
    (`up` False: a node the topic's replicas name that no longer answers)."""

    node: int
    address: str
    up: bool
    controller: bool
    leads: int
    replicas: int


@dataclass(frozen=True, slots=True)
class ClusterReport:
    """The brokers (answering and not) and the memory topic's partitions that have fewer
    replicas in sync than they should (`under_replicated`) or no leader at all (`offline`):
    the operations page's view of the log."""

    brokers: tuple[BrokerReport, ...]
    partitions: int
    under_replicated: tuple[int, ...]
    offline: tuple[int, ...]


async def cluster_report(kafka: KafkaConnection, topic: str) -> ClusterReport:
    """The cluster now, as one answering broker sees it (KafkaUnavailableError after a few
    seconds without one)."""
    async with KafkaAdmin(kafka, "describe the cluster", deadline_s=5.0) as admin:
        cluster = await admin.call("describe the cluster", lambda c: c.describe_cluster())
        (described,) = await admin.call("describe the topic", lambda c: c.describe_topics([topic]))
    partitions = list(described["partitions"])
    live = {b["node_id"]: f"{b['host']}:{b['port']}" for b in cluster["brokers"]}
    named = {node for p in partitions for node in p["replicas"]}
    brokers = tuple(
        BrokerReport(
            node=node,
            address=live.get(node, "—"),
            up=node in live,
            controller=node == cluster["controller_id"],
            leads=sum(1 for p in partitions if p["leader"] == node),
            replicas=sum(1 for p in partitions if node in p["replicas"]),
        )
        for node in sorted(live.keys() | named)
    )
    return ClusterReport(
        brokers=brokers,
        partitions=len(partitions),
        under_replicated=tuple(
            sorted(p["partition"] for p in partitions if len(p["isr"]) < len(p["replicas"]))
        ),
        offline=tuple(sorted(p["partition"] for p in partitions if p["leader"] < 0)),
    )


async def _described(kafka: KafkaConnection, topic: str, deadline_s: float) -> dict[str, Any]:
    async with KafkaAdmin(kafka, f"describe {topic}", deadline_s=deadline_s) as admin:
        (described,) = await admin.call(
            "the metadata request", lambda client: client.describe_topics([topic])
        )
    return dict(described)


async def end_offsets(kafka: KafkaConnection, topic: str) -> dict[int, int]:
    """The log end offset of each partition of `topic` ({} if the topic does not exist)."""
    partitions = await topic_partitions(kafka, topic)
    if not partitions:
        return {}
    consumer = AIOKafkaConsumer(**kafka.aiokafka(), request_timeout_ms=10_000)
    try:
        await consumer.start()
        # A partition whose leader just died has none until the cluster moves it.
        offsets = await until_settled(lambda: consumer.end_offsets(partitions))
        return {tp.partition: offset for tp, offset in offsets.items()}
    except KafkaError as exc:
        raise await _unreachable(kafka, f"read the end offsets of {topic}", exc) from exc
    finally:
        await consumer.stop()


async def _unreachable(
    kafka: KafkaConnection, doing: str, exc: KafkaError
) -> KafkaUnavailableError:
    return KafkaUnavailableError(
        f"could not {doing} on Kafka at {kafka.where}: {await kafka.explain(exc)}. Check that "
        "the broker runs (`memstream status`), MEMSTREAM_KAFKA_BOOTSTRAP points at it and the "
        "MEMSTREAM_KAFKA_* security settings are the broker's."
    )
