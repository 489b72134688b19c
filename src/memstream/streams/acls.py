"""The Kafka rights each component needs, and nothing more (docs/operations.md, "Security").

Four components talk to Kafka, each as its own user:

    agent     the agent side: the hook's producer (librdkafka) writes turns and forgets to
              the memory topic and Skipped notices to the monitoring topic, and seals turns
              under its tenants' data keys: it reads the keys topic and writes a tenant's
              first key there (streams.data_keys). It reads no memory (recall reads Redis).
    worker    `memstream worker` (Faust): consumes the memory topic in its group, writes
              consolidation summaries back to it, dead letters and monitoring notices to
              theirs, reads its group's committed offsets (healing), reads the keys topic
              to open sealed events (and writes a key when it seals a summary for a tenant
              that has none yet), and creates the topics on first start if they are missing.
    importer  `memstream import | forget | replay | verify`: writes the memory topic and
              reads it back from the start without a group (replay), reads the keys topic
              and writes its tombstones (`forget --erase`).
    server    `memstream serve`: the agent's rights (it records what callers write, seals
              under tenants' keys, announces summaries' usage on the monitoring topic), and
              Describe on the dead-letter topic: at start it checks that all four exist.

No component uses transactions (the worker is at-least-once; apply-once in Redis makes
redelivery harmless), so no transactional-id rights; and since Kafka 3.0 the right to write
a topic includes the idempotent producer's, so no cluster right either.

`KafkaGrant.command()` writes each grant as the `kafka-acls` command an operator runs; the
tests create the same grants through the admin API and run each component with only them.
"""

from __future__ import annotations

from dataclasses import dataclass

from memstream.streams.topics import Topics

__all__ = ["KAFKA_ROLES", "KafkaGrant", "kafka_grants"]

KAFKA_ROLES = ("agent", "worker", "importer", "server")


@dataclass(frozen=True, slots=True)
class KafkaGrant:
    """Allow `principal` the `operations` on one resource (a topic or a group, by its
    literal name)."""

    principal: str
    resource: str  # "topic" or "group"
    name: str
    operations: tuple[str, ...]  # Kafka's names: "Read", "Write", "Describe", "Create"

    def command(self, bootstrap: str = "BROKER:9093") -> str:
        """The `kafka-acls` command that creates this grant (as an admin, whose client
        settings are in admin.properties)."""
        operations = " ".join(f"--operation {op}" for op in self.operations)
        return (
            f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config admin.properties "
            f"--add --allow-principal User:{self.principal} {operations} "
            f"--{self.resource} {self.name}"
        )


def kafka_grants(role: str, topics: Topics, user: str | None = None) -> tuple[KafkaGrant, ...]:
    """What `role` needs on the namespace of `topics`, granted to `user` (default: the role's
    name)."""
    user = user or role
    if role in ("agent", "server"):
        agent = (
            KafkaGrant(user, "topic", topics.memory, ("Write", "Describe")),
            KafkaGrant(user, "topic", topics.monitoring, ("Write", "Describe")),
            KafkaGrant(user, "topic", topics.keys, ("Read", "Write", "Describe")),
            KafkaGrant(user, "group", topics.keys_group, ("Describe",)),
        )
        if role == "server":
            return (*agent, KafkaGrant(user, "topic", topics.dead_letters, ("Describe",)))
        return agent
    if role == "worker":
        return (
            KafkaGrant(user, "topic", topics.memory, ("Read", "Write", "Describe", "Create")),
            KafkaGrant(user, "topic", topics.dead_letters, ("Write", "Describe", "Create")),
            KafkaGrant(user, "topic", topics.monitoring, ("Write", "Describe", "Create")),
            KafkaGrant(user, "topic", topics.keys, ("Read", "Write", "Describe", "Create")),
            KafkaGrant(user, "group", topics.keys_group, ("Describe",)),
            KafkaGrant(user, "group", topics.worker_group, ("Read", "Describe")),
            *(KafkaGrant(user, "group", job, ("Read", "Describe")) for job in topics.job_groups),
        )
    if role == "importer":
        return (
            KafkaGrant(user, "topic", topics.memory, ("Read", "Write", "Describe")),
            KafkaGrant(user, "topic", topics.dead_letters, ("Describe",)),
            KafkaGrant(user, "topic", topics.monitoring, ("Describe",)),
            KafkaGrant(user, "topic", topics.keys, ("Read", "Write", "Describe")),
            KafkaGrant(user, "group", topics.keys_group, ("Describe",)),
        )
    raise ValueError(f"unknown role {role!r}; the roles are {', '.join(KAFKA_ROLES)}")
