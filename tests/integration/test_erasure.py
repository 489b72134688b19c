"""Erasure reaches the disks: proven byte for byte on the real Kafka and Redis.

Two tenants record turns through the agent side's store (sealed by default). The broker's
data directory never holds a tenant's marker word in plaintext. After `memstream forget
--tenant A --erase` and the compaction of the keys topic, neither the broker's nor Redis's
data directory holds A's marker or A's wrapped data key; B is untouched, and a rebuild from
the log (`memstream verify`) equals the live projection, A's events counted as erased.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from memstream import DecodeContext, Settings, TurnCompleted, decode_event
from memstream.deployment import Deployment
from memstream.operations import drop, erase_tenant, projection_lag
from memstream.processes import project_root
from memstream.projections.connection import rewrite_persistence
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import KEYS_CONFIG
from memstream.streams.wire import Record, event_record

from .commands import memstream
from .helpers import OwnRedis, TestStack, running_worker, wait_until

pytestmark = pytest.mark.integration

# The keys topic of this test's namespace compacts within seconds instead of the hour
# production waits (docs/erasure.md): small segments, an eager cleaner, no delays.
FAST_COMPACTION = {
    **KEYS_CONFIG,
    "segment.ms": "200",
    "max.compaction.lag.ms": "200",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
    "file.delete.delay.ms": "0",
}


def files_holding(folder: Path, *needles: bytes) -> list[str]:
    """The files under `folder` that contain any of `needles`, byte for byte."""
    found = []
    # os.walk skips folders that vanish while it walks (Kafka deletes dropped topics' folders).
    for root, _, names in os.walk(folder):
        for name in names:
            path = Path(root) / name
            try:
                data = path.read_bytes()
            except OSError:  # deleted while we looked (a segment cleaned, an AOF file retired)
                continue
            if any(needle in data for needle in needles):
                found.append(str(path.relative_to(folder)))
    return found


async def _alter(kafka: KafkaConnection, topic: str, config: dict[str, str]) -> None:
    admin = AIOKafkaAdminClient(**kafka.aiokafka())
    await admin.start()
    try:
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, config)])
    finally:
        await admin.close()


@pytest.fixture
def namespace_env(env: dict[str, str]) -> Iterator[dict[str, str]]:
    namespace = f"test-erase-{uuid.uuid4().hex[:8]}"
    own = {
        **env,
        "MEMSTREAM_NAMESPACE": namespace,
        "MEMSTREAM_MAX_MEMORIES": "0",
        "MEMSTREAM_KEYS_CLOCK_S": "0.5",  # the worker rolls the keys topic's segments
    }
    yield own
    drop(Deployment(Settings.from_env(own)))


def test_an_erased_tenant_is_gone_from_every_disk_and_the_other_is_untouched(
    namespace_env: dict[str, str], tmp_path: Path
) -> None:
    settings = Settings.from_env(namespace_env)
    if not settings.encryption:
        pytest.fail("MEMSTREAM_ENCRYPTION is off in this environment; the test needs it on")
    state = project_root() / settings.state_dir
    kafka_data, redis_data = state / "kafka" / "data", state / "redis"
    deployment = Deployment(settings)
    asyncio.run(deployment.ensure_topics())
    asyncio.run(_alter(deployment.kafka, deployment.topics.keys, FAST_COMPACTION))
    marker_a = f"quokka{uuid.uuid4().hex}".encode()
    marker_b = f"wombat{uuid.uuid4().hex}".encode()
    a, b = f"tenant-a-{uuid.uuid4().hex[:6]}", f"tenant-b-{uuid.uuid4().hex[:6]}"

    def turn(tenant: str, marker: bytes, n: int) -> TurnCompleted:
        word = marker.decode()
        return TurnCompleted(
            tenant=tenant,
            thread=f"thread-{n % 2}",
            run="run-1",
            turn=n,
            query=f"what is the code word {n}? it is {word}",
            answer=f"the code word is {word}, number {n}",
            recorded_at=datetime.now(UTC),
            importance=0.5,
            embedding_model=deployment.embedding_model,
            metadata={"note": f"{word} in metadata"},
        )

    with running_worker(namespace_env, tmp_path / "worker.log"):
        stores = deployment.stores()
        turns = [turn(a, marker_a, n) for n in range(5)] + [turn(b, marker_b, n) for n in range(5)]
        for event in turns:
            stores(event.tenant).write(event)
        assert stores.publisher.flush(30)
        assert not deployment.status().wait_applied(turns, 60)
        reader = deployment.reader()
        before_b = sorted((m.id, m.content) for m in reader.memories(b))
        assert len(before_b) == 10 and all(marker_b.decode() in c for _, c in before_b)
        assert len(reader.memories(a)) == 10

        # Sealed in the log: no marker anywhere in the broker's data (Redis holds it: search
        # needs it). The positive controls show the search would find what is there.
        keyring = deployment.keyring()
        assert keyring is not None
        keyring.refresh()
        (record_a,) = [r for (t, _), r in keyring.state.records().items() if t == a]
        wrapped_a = (record_a.wrapped.encode(), base64.b64decode(record_a.wrapped))
        assert files_holding(kafka_data, marker_a, marker_b) == []
        assert files_holding(kafka_data, *wrapped_a), "the wrapped key should be on disk yet"
        wait_until(
            lambda: files_holding(redis_data, marker_a) != [],
            "Redis's append-only file to hold A's memories (the positive control)",
        )

        erasure = erase_tenant(deployment, a)
        assert erasure.destroyed == (record_a.key_id,) and "aof" in erasure.rewritten
        assert reader.memories(a) == []
        assert deployment.recaller().recall(a, marker_a.decode(), k=5) == []
        assert sorted((m.id, m.content) for m in reader.memories(b)) == before_b

        # Compaction: the tombstones must leave the active segment, which rolls only on a write
        # after segment.ms. Nothing else writes the keys topic now: the worker's clock does.
        wait_until(
            lambda: files_holding(kafka_data, *wrapped_a) == [],
            "A's wrapped key to be compacted away (the worker's clock rolling the segment)",
            180,
        )
        wait_until(
            lambda: files_holding(redis_data, marker_a) == [],
            "Redis's rewritten files to hold nothing of A",
        )
        assert files_holding(state, marker_a, *wrapped_a) == []
        assert files_holding(kafka_data, marker_b) == []

        # The log still rebuilds: B the same as live, A's events erased, not dead letters.
        verify = subprocess.run(
            [sys.executable, "-m", "memstream", "verify", "--timeout", "60"],
            env=namespace_env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert "5 erased" in verify.stderr, verify.stderr
        assert sorted((m.id, m.content) for m in reader.memories(b)) == before_b


def test_an_old_plaintext_log_is_copied_sealed_and_reads_the_same(
    namespace_env: dict[str, str],
) -> None:
    old = TestStack(Settings.from_env({**namespace_env, "MEMSTREAM_ENCRYPTION": "off"}))
    new_namespace = f"{old.settings.namespace}-sealed"
    new_env = {**namespace_env, "MEMSTREAM_NAMESPACE": new_namespace}
    marker = f"numbat{uuid.uuid4().hex}"
    events = [
        old.turn(f"tenant-{n % 3}", f"q {marker} {n}", f"a {marker}", turn=n) for n in range(9)
    ]
    asyncio.run(Deployment(old.settings).ensure_topics())
    old.publish(events)  # plaintext, as memstream wrote before encryption (or another producer)
    old.publish_raw(b"tenant-0", b"not an event")  # a dead letter of the old log
    try:
        copy = subprocess.run(
            [sys.executable, "-m", "memstream", "erasure", "encrypt", "--to", new_namespace],
            env=old.settings.environ() | {"PATH": os.environ.get("PATH", "")},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        # A message that is no event is not copied silently: the copy fails, saying so.
        assert copy.returncode == 2 and "1 event_decode" in copy.stderr, copy.stderr
        copy = subprocess.run(
            [
                sys.executable, "-m", "memstream", "erasure", "encrypt", "--to",
                f"{new_namespace}2", "--allow-dead-letters",
            ],
            env=old.settings.environ() | {"PATH": os.environ.get("PATH", "")},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )  # fmt: skip
        assert copy.returncode == 0, copy.stderr
        assert "copied 9 events" in copy.stderr
        sealed = TestStack(
            Settings.from_env({**new_env, "MEMSTREAM_NAMESPACE": f"{new_namespace}2"})
        )
        records = sealed.read_topic(sealed.topics.memory, lambda rs: len(rs) >= 9)
        assert len(records) == 9
        assert all(marker.encode() not in r.value and b'"sealed"' in r.value for r in records)
        keyring = Deployment(sealed.settings).keyring()
        copies = [decode_event(r.value, DecodeContext(key=r.key, keyring=keyring)) for r in records]
        assert sorted(copies, key=lambda e: e.id) == sorted(events, key=lambda e: e.id)
    finally:
        for namespace in (new_namespace, f"{new_namespace}2"):
            drop(Deployment(Settings.from_env({**new_env, "MEMSTREAM_NAMESPACE": namespace})))


def test_redis_files_are_rewritten_without_what_was_deleted_aof_and_rdb(tmp_path: Path) -> None:
    server = OwnRedis(tmp_path)
    data = tmp_path / "data"
    with server.running(data, "--appendonly", "yes", "--save", "3600 1"):
        client = server.client()
        marker = f"bilby{uuid.uuid4().hex}".encode()
        client.hset("memory:a", mapping={"content": marker})
        client.set("memory:b", b"kept")
        client.save()  # an RDB snapshot holding the marker, as a scheduled save would make

        def holding(needle: bytes) -> bool:
            return files_holding(data, needle) != []

        wait_until(lambda: holding(marker), "the marker on disk (the positive control)")
        client.delete("memory:a")
        assert rewrite_persistence(client, 60) == ["aof", "rdb"]
        wait_until(lambda: not holding(marker), "Redis's old files to be deleted")
        assert client.get("memory:b") == b"kept"


def test_forget_erase_on_the_command_line_erases_the_tenant_and_says_what_it_did(
    settings: Settings, env: dict[str, str], worker: Path
) -> None:
    deployment = Deployment(settings)
    tenant, other = f"cli-erase-{uuid.uuid4().hex[:6]}", f"cli-keep-{uuid.uuid4().hex[:6]}"
    stack = TestStack(settings)
    turns = [stack.turn(t, f"where is the {t} key?", "under the mat") for t in (tenant, other)]
    stores = deployment.stores()
    for event in turns:
        stores(event.tenant).write(event)
    assert stores.publisher.flush(30)
    assert not deployment.status().wait_applied(turns, 60)
    done = memstream(env, "forget", "--tenant", tenant, "--erase")
    assert done.returncode == 0, done.stderr
    assert "data keys destroyed: 1" in done.stderr and "aof" in done.stderr
    assert deployment.reader().memories(tenant) == []
    assert len(deployment.reader().memories(other)) == 2
    refused = memstream(env, "forget", "--tenant", tenant, "--erase", "--all")
    assert refused.returncode != 0 and "leave out" in refused.stderr
    deployment.close()


def test_rewrap_moves_every_data_key_to_the_new_master_key(
    namespace_env: dict[str, str],
) -> None:
    old, new = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    before = Deployment(Settings.from_env({**namespace_env, "MEMSTREAM_MASTER_KEY": old}))
    asyncio.run(before.ensure_topics())
    keyring = before.keyring()
    assert keyring is not None
    keys = {t: keyring.current(t) for t in ("acme", "globex")}
    before.close()
    rotating = {**namespace_env, "MEMSTREAM_MASTER_KEY": new, "MEMSTREAM_PREVIOUS_MASTER_KEYS": old}
    done = memstream(rotating, "erasure", "rewrap")
    assert done.returncode == 0 and "re-wrapped 2 data keys" in done.stderr, done.stderr
    # Only the new master key now: the same data keys unwrap from the re-wrapped records.
    after = Deployment(Settings.from_env({**namespace_env, "MEMSTREAM_MASTER_KEY": new}))
    reader = after.keyring()
    assert reader is not None
    for tenant, key in keys.items():
        assert reader.lookup(tenant, key.key_id).secret == key.secret
    after.close()


def test_a_running_agent_learns_of_an_erasure_while_its_turns_go_on(
    namespace_env: dict[str, str],
) -> None:
    # The agent re-reads the keys topic when its view is older than MEMSTREAM_KEYS_REFRESH_S,
    # on a thread of its own; meanwhile its turns seal with the keys it knows.
    stale = {**namespace_env, "MEMSTREAM_KEYS_REFRESH_S": "0.2"}
    tenant = f"tenant-{uuid.uuid4().hex[:6]}"
    with (
        Deployment(Settings.from_env(stale)) as agent,
        Deployment(Settings.from_env(namespace_env)) as operator,
    ):
        asyncio.run(agent.ensure_topics())
        keyring, erasing = agent.keyring(), operator.keyring()
        assert keyring is not None and erasing is not None
        first = keyring.current(tenant)
        assert erasing.erase(tenant) == [first.key_id]
        wait_until(
            lambda: keyring.current(tenant).key_id != first.key_id,
            "the agent to learn of the erasure and seal under a new key",
        )
        assert first.key_id in keyring.state.erased(tenant)


def test_an_erasure_waits_for_the_turns_its_own_process_still_buffers(
    namespace_env: dict[str, str], tmp_path: Path
) -> None:
    # The agent side seals each event on its publisher's thread, after the turn. A turn recorded
    # before the erasure, still buffered when the erasure destroys the tenant's key, would be
    # sealed under a new key and land after the erasure: it must not survive it.
    tenant, other = f"tenant-{uuid.uuid4().hex[:6]}", f"tenant-{uuid.uuid4().hex[:6]}"
    with (
        Deployment(Settings.from_env(namespace_env)) as deployment,
        running_worker(namespace_env, tmp_path / "worker.log"),
    ):
        keyring = deployment.keyring()
        assert keyring is not None, "the test needs MEMSTREAM_ENCRYPTION on"
        stores = deployment.stores()

        def turn(of: str) -> TurnCompleted:
            return TurnCompleted(
                tenant=of,
                thread="t",
                run=uuid.uuid4().hex,
                turn=0,
                query="my locker code is 4512",
                answer="noted",
                recorded_at=datetime.now(UTC),
                importance=0.5,
                embedding_model=deployment.embedding_model,
            )

        def ahead() -> Record:
            # Held up until the tenant's key is destroyed (an erasure that does not wait for
            # the buffer does that at once), or 3 s (one that waits never does).
            deadline = time.monotonic() + 3
            while not keyring.state.erased(tenant) and time.monotonic() < deadline:
                time.sleep(0.02)
            return event_record(deployment.topics, turn(other), keyring)

        stores.publisher.submit(ahead)
        recorded = turn(tenant)
        stores(tenant).write(recorded)
        erase_tenant(deployment, tenant)
        assert stores.publisher.flush(30)
        wait_until(
            lambda: not any(projection_lag(deployment).values()),
            "the worker to apply everything in the log",
        )
        assert deployment.projection.reader().memories(tenant) == []
