"""The pipe through a secured Kafka (SASL_SSL: SCRAM-SHA-512 and mutual TLS, ACLs enforced)
and a secured Redis (TLS with client certificates, ACL users, the default user off), each
component running as its own user with only the rights docs/operations.md gives it; and the
failures an operator meets first (a wrong password, an untrusted certificate), which must come
at once and say what failed and where, without the secret."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import redis
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from memstream import Settings, TurnCompleted
from memstream.deployment import Deployment
from memstream.errors import KafkaUnavailableError, RedisUnavailableError
from memstream.operations import drop, erase_tenant, worker_process
from memstream.projections.acl import redis_acl
from memstream.projections.connection import COMPACT_AFTER, compact, redis_client, redis_errors
from memstream.projections.schema import Keyspace
from memstream.streams.acls import KafkaGrant, kafka_grants
from memstream.streams.background_publisher import BackgroundPublisher
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import Topics, ensure_topics
from memstream.streams.wire import Record

from .helpers import wait_until
from .secure_stack import ADMIN, SecureStack
from .serving import create_key, serving

pytestmark = pytest.mark.integration

# A refused connection must be reported in seconds, not after a client's retry budget.
PROMPT_S = 15.0


@dataclass(frozen=True)
class Secured:
    """One namespace on the secured stack, and the settings each component runs with."""

    stack: SecureStack
    agent: Settings
    worker: Settings
    importer: Settings
    server: Settings
    admin: Settings


def _grant_kafka(admin: KafkaConnection, grants: tuple[KafkaGrant, ...]) -> None:
    kinds = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP}
    bindings = [
        AclBinding(
            kinds[grant.resource],
            grant.name,
            ResourcePatternType.LITERAL,
            f"User:{grant.principal}",
            "*",
            AclOperation[operation.upper()],
            AclPermissionType.ALLOW,
        )
        for grant in grants
        for operation in grant.operations
    ]
    client = AdminClient(admin.librdkafka())
    for future in client.create_acls(bindings, request_timeout=30).values():
        future.result()


def _settings(stack: SecureStack, env: dict[str, str], namespace: str, user: str) -> Settings:
    return Settings.from_env(
        {
            **env,
            **stack.environ(user),
            "MEMSTREAM_NAMESPACE": namespace,
            "MEMSTREAM_PARTITIONS": "2",
        }
    )


@pytest.fixture(scope="module")
def secured(secure_stack: SecureStack, env: dict[str, str]) -> Iterator[Secured]:
    namespace = f"sec-{uuid.uuid4().hex[:10]}"
    topics, keys = Topics(namespace, 2), Keyspace(namespace)
    admin_redis = redis_client(secure_stack.redis(ADMIN))
    for role in ("agent", "worker", "importer", "server"):
        _grant_kafka(secure_stack.kafka(ADMIN), kafka_grants(role, topics))
        admin_redis.execute_command("ACL", "SETUSER", role, *redis_acl(role, keys))
    secured = Secured(
        secure_stack,
        *(
            _settings(secure_stack, env, namespace, user)
            for user in ("agent", "worker", "importer", "server")
        ),
        admin=_settings(secure_stack, env, namespace, ADMIN),
    )
    yield secured
    drop(Deployment(secured.admin))


def _turn(tenant: str, query: str, answer: str, model: str) -> TurnCompleted:
    return TurnCompleted(
        tenant=tenant,
        thread="t1",
        run=f"run-{uuid.uuid4().hex[:8]}",
        turn=0,
        query=query,
        answer=answer,
        recorded_at=datetime.now(UTC),
        importance=0.5,
        embedding_model=model,
    )


def test_the_pipe_runs_through_sasl_ssl_kafka_and_tls_acl_redis_each_part_as_its_own_user(
    secured: Secured, tmp_path: Path
) -> None:
    tenant = f"sec-{uuid.uuid4().hex[:6]}"
    with Deployment(secured.agent) as agent, Deployment(secured.importer) as importer:
        model = agent.embedding_model
        probe = _turn("__probe__", "is the worker up?", "yes", model)
        # The worker creates its topics, consumes in its group and writes Redis as "worker".
        with worker_process(Deployment(secured.worker), tmp_path / "worker.log", probe):
            # record: the hook's path, librdkafka with SCRAM over mutual TLS, as "agent".
            store = agent.stores()(tenant)
            kept = _turn(tenant, "My dog is called Rex.", "Rex is a fine name.", model)
            dropped = _turn(tenant, "My cat is called Tom.", "Tom is a fine name.", model)
            for event in (kept, dropped):
                store.write(event)
            assert agent.stores().publisher.flush(30)
            assert not agent.status().wait_applied([kept, dropped], 60)

            # recall, as "agent" (read-only in Redis).
            hits = store.search("What is my dog called?", k=1)
            assert [h.memory.content for h in hits] == ["My dog is called Rex."]

            # forget, as "importer" (memstream forget).
            cat = next(m.id for m in store.memories() if m.content == "My cat is called Tom.")

            async def forget() -> object:
                async with importer.event_publisher() as publisher:
                    return await publisher.forget(tenant, memory_ids=[cat])

            forgotten = asyncio.run(forget())
            assert not agent.status().wait_applied([forgotten], 60)  # type: ignore[list-item]
            assert cat not in {m.id for m in store.memories()}

            # forget --erase, as "importer": another tenant's keys destroyed, its memories
            # deleted, Redis's files rewritten (BGSAVE/BGREWRITEAOF without CONFIG rights).
            gone = f"{tenant}-gone"
            doomed = _turn(gone, "My fish is called Nemo.", "A fine fish.", model)
            agent.stores()(gone).write(doomed)
            assert agent.stores().publisher.flush(30)
            assert not agent.status().wait_applied([doomed], 60)
            erasure = erase_tenant(importer, gone, timeout_s=60)
            assert erasure.sealed and erasure.destroyed and erasure.rewritten
            assert agent.stores()(gone).search("What is my fish called?", k=3) == []

        # replay, as "importer": a new generation from the log, swapped in.
        async def replay() -> object:
            async with importer.replayer() as replayer:
                return await replayer.rebuild(swap=True)

        rebuilt = asyncio.run(replay())
        assert rebuilt.swapped  # type: ignore[attr-defined]
        assert rebuilt.erased == 1  # type: ignore[attr-defined]  # the erased tenant's turn
        contents = {m.content for m in store.memories()}
        assert "My dog is called Rex." in contents and "My cat is called Tom." not in contents
        assert [h.memory.content for h in store.search("my dog", k=1)] == ["My dog is called Rex."]


def test_the_server_as_its_own_user_serves_sessions_and_memories_and_writes_no_memory(
    secured: Secured, tmp_path: Path
) -> None:
    """`memstream serve` as "server" (projections/acl.py's role): working memory and the
    long-term routes work, the turns it records reach the projection through the log (the
    worker), and Redis refuses it a direct write of a projection key."""
    tenant = f"sec-srv-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, **secured.server.environ()}
    key = create_key(env, "--tenant", tenant)  # `memstream keys` as the server's user
    probe = _turn(
        "__probe__", "is the worker up?", "yes", Deployment(secured.agent).embedding_model
    )
    with (
        worker_process(Deployment(secured.worker), tmp_path / "worker.log", probe),
        serving(env, tmp_path / "server.log") as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http,
    ):
        talk = [
            {"role": "user", "content": "My parrot is called Kiwi."},
            {"role": "assistant", "content": "Kiwi, noted."},
        ]
        put = http.put("/v1/working-memory/s1", json={"messages": talk, "ttl_seconds": 600})
        assert put.status_code == 200, put.text
        assert http.get("/v1/working-memory/s1").json()["version"] == 1
        assert http.get("/v1/working-memory/").json()["sessions"] == ["s1"]
        written = http.post(
            "/v1/long-term-memory/?wait=true&wait_timeout=30",
            json={"memories": [{"id": uuid.uuid4().hex, "text": "The user sails on Sundays"}]},
        )
        assert written.status_code == 200, written.text

        def recalled() -> list[str]:
            found = http.post("/v1/long-term-memory/search", json={"text": "", "limit": 10})
            assert found.status_code == 200, found.text
            return sorted(m["text"] for m in found.json()["memories"])

        wait_until(lambda: len(recalled()) == 3, "the session's turn and the memory projected")
        assert "My parrot is called Kiwi." in recalled()
        assert http.delete("/v1/working-memory/s1").status_code == 200

    keys = Keyspace(secured.server.namespace)
    server = redis_client(Deployment(secured.server).projection.connection)
    live = keys.at(int(server.get(keys.generation_key) or 1))  # another test may replay
    assert server.zcard(live.order(tenant)) == 3  # it reads the projection...
    with pytest.raises(redis.exceptions.NoPermissionError):
        server.hset(f"{live.tenant_memory_prefix(tenant)}forged", "content", "forged")
    with pytest.raises(redis.exceptions.NoPermissionError):
        server.set(keys.generation_key, "7")  # ...and writes none of it


def test_each_user_is_refused_what_its_role_does_not_need(secured: Secured) -> None:
    namespace = secured.agent.namespace
    topics = Topics(namespace, 2)
    asyncio.run(ensure_topics(secured.stack.kafka(ADMIN), topics))  # the worker may not be up yet
    agent_kafka = KafkaConnection.from_settings(secured.agent)

    async def consume_as_agent() -> None:
        consumer = AIOKafkaConsumer(
            topics.memory, **agent_kafka.aiokafka(), group_id=None, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=5000)
        finally:
            await consumer.stop()

    # The agent writes the log but may not read it (nor, so, anyone's memories through it).
    with pytest.raises(KafkaError, match="TopicAuthorizationFailed"):
        asyncio.run(asyncio.wait_for(consume_as_agent(), PROMPT_S))

    async def join_the_workers_group_as_importer() -> None:
        consumer = AIOKafkaConsumer(
            topics.memory,
            **KafkaConnection.from_settings(secured.importer).aiokafka(),
            group_id=topics.worker_group,
        )
        try:
            await consumer.start()
            await consumer.getmany(timeout_ms=5000)
        finally:
            await consumer.stop()

    # The importer reads the log without a group: it may not join (and take partitions from)
    # the workers' group.
    with pytest.raises(KafkaError, match="GroupAuthorizationFailed"):
        asyncio.run(asyncio.wait_for(join_the_workers_group_as_importer(), PROMPT_S))

    # In Redis the agent reads its namespace and writes nothing; no user reaches another
    # namespace's keys, the worker included.
    agent = redis_client(Deployment(secured.agent).projection.connection)
    worker = redis_client(Deployment(secured.worker).projection.connection)
    redis_client(secured.stack.redis(ADMIN)).set("someone-else:generation", "1")
    agent.get(Keyspace(namespace).generation_key)  # allowed
    with pytest.raises(redis.exceptions.NoPermissionError):
        agent.set(Keyspace(namespace).generation_key, "7")
    for client in (agent, worker):
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.get("someone-else:generation")
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.scan(0, match="someone-else:*")  # SCAN would list other namespaces' keys
    # The importer (reshard) copies a session with a compare-and-set; the agent may not.
    importer = redis_client(Deployment(secured.importer).projection.connection)
    session = Keyspace(namespace).session("sec-moved", "s")
    with importer.pipeline() as pipe:
        pipe.watch(session)  # type: ignore[no-untyped-call]
        pipe.multi()
        pipe.hset(session, mapping={"document": "{}", "version": 1})
        assert pipe.execute() == [2]
    with pytest.raises(redis.exceptions.NoPermissionError), agent.pipeline() as pipe:
        pipe.watch(session)  # type: ignore[no-untyped-call]
    with pytest.raises(redis.exceptions.NoPermissionError):
        worker.config_get("appendonly")  # nobody gets @admin...
    assert not compact(worker, COMPACT_AFTER)  # ...so a large delete leaves the rewrite to Redis


@pytest.mark.parametrize("what", ["password", "certificate"])
def test_a_wrong_kafka_password_or_untrusted_broker_fails_at_once_saying_where(
    secure_stack: SecureStack, what: str
) -> None:
    right = secure_stack.kafka("importer")
    wrong = (
        dataclasses.replace(right, password="not-the-password")
        if what == "password"
        else dataclasses.replace(right, ca_file=str(secure_stack.certificates.untrusted_ca))
    )
    started = time.monotonic()
    with pytest.raises(KafkaUnavailableError) as raised:
        asyncio.run(ensure_topics(wrong, Topics(f"sec-{uuid.uuid4().hex[:6]}", 1)))
    assert time.monotonic() - started < PROMPT_S
    message = str(raised.value)
    assert secure_stack.bootstrap in message and "SASL_SSL" in message
    assert (
        "the SASL login failed" if what == "password" else "the TLS handshake failed"
    ) in message
    assert wrong.password not in message and right.password not in message


@pytest.mark.parametrize(
    ("what", "says"),
    [("password", "SASL authentication error"), ("certificate", "certificate verify failed")],
)
def test_the_hook_producer_reports_a_refusal_naming_the_broker(
    secure_stack: SecureStack, caplog: pytest.LogCaptureFixture, what: str, says: str
) -> None:
    right = secure_stack.kafka("agent")
    wrong = (
        dataclasses.replace(right, password="not-the-password")
        if what == "password"
        else dataclasses.replace(right, ca_file=str(secure_stack.certificates.untrusted_ca))
    )
    caplog.set_level(logging.WARNING, logger="memstream.streams.background_publisher")

    def reported() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.levelno == logging.WARNING and says in r.getMessage()
        ]

    publisher = BackgroundPublisher(wrong)
    try:
        publisher.submit(Record("sec-nowhere.memory", b"k", b"v"))
        wait_until(lambda: bool(reported()), "the producer to report the refusal", PROMPT_S)
    finally:
        publisher.close(0)
    message = reported()[0]
    assert f"Kafka at {secure_stack.bootstrap} over SASL_SSL as 'agent'" in message
    assert wrong.password not in message and right.password not in message


@pytest.mark.parametrize("what", ["password", "certificate"])
def test_a_wrong_redis_password_or_untrusted_server_fails_at_once_saying_where(
    secure_stack: SecureStack, what: str
) -> None:
    right = secure_stack.redis("agent")
    wrong = (
        dataclasses.replace(right, password="not-the-password")
        if what == "password"
        else dataclasses.replace(right, ca_file=str(secure_stack.certificates.untrusted_ca))
    )
    started = time.monotonic()
    with pytest.raises(RedisUnavailableError) as raised, redis_errors(wrong.where, "a ping"):
        redis_client(wrong).ping()
    assert time.monotonic() - started < PROMPT_S
    message = str(raised.value)
    assert f"127.0.0.1:{secure_stack.redis_port}" in message
    assert (
        "invalid username-password" if what == "password" else "CERTIFICATE_VERIFY_FAILED"
    ) in message
    assert wrong.password not in message and right.password not in message


def test_a_worker_with_a_wrong_password_exits_at_once_saying_why(secured: Secured) -> None:
    env = {
        **os.environ,
        **secured.worker.environ(),
        "MEMSTREAM_KAFKA_PASSWORD": "not-the-password",
    }
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "memstream", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Python and the package's imports take a few seconds of this on a busy machine.
    assert time.monotonic() - started < 30
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"Kafka at {secured.stack.bootstrap} over SASL_SSL as 'worker'" in result.stderr
    assert "the SASL login failed" in result.stderr
    assert "not-the-password" not in result.stderr + result.stdout
    assert secured.stack.passwords["worker"] not in result.stderr + result.stdout
