"""The projection sharded over three Redis (MEMSTREAM_REDIS_SHARDS), on the real Kafka.

Three Redis of this test's own (free ports, state in tmp_path) are the shards; the suite's
Kafka carries a namespace of its own with six partitions. A worker projects turns of tenants
spread over every shard: each tenant's memories, markers and order set sit on its shard
(partition mod 3) and nowhere else, each shard's positions hash holds only its partitions, and
every door (the agent side's stores, the reader, the HTTP API's and MCP tools' search, the
LangGraph store, stats) answers each tenant from its shard. An erasure deletes the tenant on
its shard and leaves the others untouched. `replay --shard N` and `verify --shard N` work on
one shard while the others serve; a shard SIGKILLed mid-stream takes only its tenants' recall
and projection with it (the other shards' tenants get new memories recalled meanwhile), and
once restarted it heals from the log with nothing lost or doubled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from memstream import MessageRecorded, Settings
from memstream.deployment import Deployment
from memstream.errors import RedisUnavailableError
from memstream.integrations.langgraph import MemstreamStore, NamespaceTenants
from memstream.memory.events import MemoryEvent
from memstream.memory.ports import ProjectionProgress, StoredSession, WorkingMemoryStore
from memstream.memory.tenancy import tenant_token
from memstream.operations import drop, erase_tenant, reshard
from memstream.projections.recall import SearchFilter
from memstream.projections.schema import Keyspace
from memstream.streams.wire import partition_of
from memstream.testing.stack import wait_until_recallable

from .commands import memstream
from .helpers import OwnRedis, TestStack, running_worker, wait_until

T = TypeVar("T")

pytestmark = pytest.mark.integration

SHARDS = 3
PARTITIONS = 6
TENANTS = 9  # three per shard


def tenants_by_shard() -> dict[int, list[str]]:
    """Tenant ids, three on each shard (by the producers' partitioner, mod SHARDS)."""
    found: dict[int, list[str]] = {shard: [] for shard in range(SHARDS)}
    n = 0
    while any(len(own) < TENANTS // SHARDS for own in found.values()):
        tenant = f"shard-tenant-{n}"
        shard = partition_of(tenant, PARTITIONS) % SHARDS
        if len(found[shard]) < TENANTS // SHARDS:
            found[shard].append(tenant)
        n += 1
    return found


@pytest.fixture
def shards(tmp_path: Path) -> Iterator[list[OwnRedis]]:
    redises = [OwnRedis(tmp_path) for _ in range(SHARDS)]
    started = []
    try:
        for n, redis in enumerate(redises):
            started.append(redis)
            # An append-only file, fsynced every second as the stack's: a SIGKILLed shard comes
            # back from its files (up to a second of acknowledged writes lost: healing's job).
            redis.start(tmp_path / f"shard-{n}", "--appendonly", "yes")
        for redis in redises:
            wait_until(redis.answers, f"shard Redis on port {redis.port}")
        yield redises
    finally:
        for redis in started:
            redis.stop()


@pytest.fixture
def sharded_env(env: dict[str, str], shards: list[OwnRedis]) -> Iterator[dict[str, str]]:
    own = {
        **env,
        "MEMSTREAM_NAMESPACE": f"test-shards-{uuid.uuid4().hex[:8]}",
        "MEMSTREAM_PARTITIONS": str(PARTITIONS),
        "MEMSTREAM_REDIS_SHARDS": ",".join(redis.url for redis in shards),
        "MEMSTREAM_MAX_MEMORIES": "0",
    }
    yield own
    deployment = Deployment(Settings.from_env(own))
    drop(deployment)
    deployment.close()


def recorded(stack: TestStack, tenant: str, n: int) -> MessageRecorded:
    return MessageRecorded(
        tenant,
        "t",
        f"{tenant}-m{n}",
        f"{tenant} keeps note {n} about the lighthouse",
        "user",
        stack.turn(tenant, "q", "a").recorded_at,
        0.5,
        stack.model_id,
    )


def notes(stack: TestStack, placed: dict[int, list[str]], numbers: range) -> list[MemoryEvent]:
    """Note `n` of every placed tenant, for each n of `numbers`."""
    return [
        recorded(stack, tenant, n) for own in placed.values() for tenant in own for n in numbers
    ]


def wait_projected(status: ProjectionProgress, events: list[MemoryEvent], what: str) -> None:
    wait_until(lambda: not status.unapplied(events), what, timeout=120)


def test_tenants_live_on_their_shard_only_and_every_door_reads_it(
    sharded_env: dict[str, str], shards: list[OwnRedis], tmp_path: Path
) -> None:
    settings = Settings.from_env(sharded_env)
    stack = TestStack(settings)
    keys = Keyspace(settings.namespace).at(1)
    placed = tenants_by_shard()
    events: list[MemoryEvent] = notes(stack, placed, range(3))
    with running_worker(sharded_env, tmp_path / "worker.log"), Deployment(settings) as deployment:
        stack.publish(events)
        status = deployment.status()
        wait_projected(status, events, "every event projected")

        for shard, own in placed.items():
            client = shards[shard].client()
            for tenant in own:
                assert client.zcard(keys.order(tenant)) == 3
                assert client.hlen(keys.applied(tenant)) == 3
                for other, redis in enumerate(shards):
                    if other != shard:  # nothing of the tenant anywhere else
                        stray = list(redis.client().scan_iter(match=f"*{tenant}*"))
                        assert stray == [], (tenant, other, stray)
            # Its positions hash holds its own partitions' positions, no other shard's.
            fields = {field.decode() for field in client.hgetall(keys.positions)}
            assert fields
            assert all(int(field.rpartition("/")[2]) % SHARDS == shard for field in fields)

        stores = deployment.stores()
        search = deployment.projection.search(
            deployment.embedders, tuning=deployment.recall_tuning()
        )
        for own in placed.values():
            for tenant in own:
                recalled = stores(tenant).search("lighthouse note", k=10)
                assert {hit.memory.tenant for hit in recalled} == {tenant}
                assert len(recalled) == 3
                assert len(deployment.reader().memories(tenant)) == 3
                page = search.search(SearchFilter(tenant=tenant), "lighthouse note", limit=10)
                assert page.total == 3 and {hit.memory.tenant for hit in page.hits} == {tenant}
                assert status.memory_count(tenant) == 3
        stats = {row.tenant: row.memories for row in status.tenant_stats()}
        probe = {"__probe__": status.memory_count("__probe__")}
        assert stats == {tenant: 3 for own in placed.values() for tenant in own} | probe

        shown = memstream(sharded_env, "stats", "--json")
        assert shown.returncode == 0, shown.stderr
        body = json.loads(shown.stdout)
        assert [row["shard"] for row in body["shards"]] == [0, 1, 2]
        for row in body["shards"]:
            assert row["reachable"] and row["lag"] == 0 and row["memory_used_bytes"] > 0
            assert row["partitions"] == [p for p in range(PARTITIONS) if p % SHARDS == row["shard"]]
        assert (
            sum(row["memories"] for row in body["shards"])
            == body["memories"]
            == sum(stats.values())
        )

        # The LangGraph store writes through the log and reads the tenant's shard.
        graph = MemstreamStore(deployment, tenants=NamespaceTenants((0,)), read_your_writes=True)
        for shard, own in placed.items():
            tenant = own[2]
            graph.put((tenant, "notes"), "k", {"text": f"the harbour of {tenant}"})
            item = graph.get((tenant, "notes"), "k")
            assert item is not None and item.value == {"text": f"the harbour of {tenant}"}
            found = graph.search((tenant,), query="harbour", limit=10)
            assert [hit.key for hit in found] == ["k"]
            assert shards[shard].client().zcard(keys.order(tenant)) == 4

        erased = placed[1][0]
        erase_tenant(deployment, erased, timeout_s=60)
        assert shards[1].client().zcard(keys.order(erased)) == 0
        assert deployment.reader().memories(erased) == []
        for shard, own in placed.items():  # every other tenant untouched, on every shard
            for tenant in own:
                if tenant != erased:
                    kept = 4 if tenant == own[2] else 3
                    assert shards[shard].client().zcard(keys.order(tenant)) == kept


def test_replay_and_verify_one_shard_while_the_others_serve(
    sharded_env: dict[str, str], shards: list[OwnRedis], tmp_path: Path
) -> None:
    settings = Settings.from_env(sharded_env)
    stack = TestStack(settings)
    placed = tenants_by_shard()
    events: list[MemoryEvent] = notes(stack, placed, range(2))
    with running_worker(sharded_env, tmp_path / "worker.log"), Deployment(settings) as deployment:
        stack.publish(events)
        status = deployment.status()
        wait_projected(status, events, "every event projected")
        generation = Keyspace(settings.namespace).generation_key

        replayed = memstream(sharded_env, "replay", "--shard", "2")
        assert replayed.returncode == 0, replayed.stderr
        # Shard 2 swapped in a rebuilt generation; shards 0 and 1 were not touched.
        assert int(shards[2].client().get(generation) or 1) > 1
        assert shards[0].client().get(generation) is None
        assert shards[1].client().get(generation) is None
        for own in placed.values():
            for tenant in own:
                assert status.memory_count(tenant) == 2

        verified = memstream(sharded_env, "verify", "--shard", "2")
        assert verified.returncode == 0, verified.stderr
        assert "equals the rebuild" in verified.stderr

        everything = memstream(sharded_env, "replay")  # every shard, at the same time
        assert everything.returncode == 0, everything.stderr
        for shard in range(SHARDS):
            assert f"shard {shard}: read" in everything.stderr
        for own in placed.values():
            for tenant in own:
                assert status.memory_count(tenant) == 2
                assert len(deployment.reader().memories(tenant)) == 2

        wrong = memstream(sharded_env, "verify", "--shard", "3")
        assert wrong.returncode != 0
        assert "0..2" in wrong.stderr


def test_a_shard_killed_mid_stream_takes_only_its_tenants_and_heals(
    sharded_env: dict[str, str], shards: list[OwnRedis], tmp_path: Path
) -> None:
    settings = Settings.from_env(sharded_env)
    stack = TestStack(settings)
    placed = tenants_by_shard()
    first: list[MemoryEvent] = notes(stack, placed, range(2))
    later: list[MemoryEvent] = notes(stack, placed, range(2, 4))
    dead = shards[0]
    with running_worker(sharded_env, tmp_path / "worker.log"), Deployment(settings) as deployment:
        status = deployment.status()
        stack.publish(first)
        wait_projected(status, first, "the first events projected")

        stack.publish(later)
        dead.stop()  # SIGKILL while the worker projects `later` (shard 0's part waits for it)
        stores = deployment.stores()
        # The live shards go on projecting: their tenants' new memories are recalled while
        # shard 0 is down (only shard 0's partitions wait for it).
        fresh = [recorded(stack, tenant, 4) for shard in (1, 2) for tenant in placed[shard]]
        stack.publish(fresh)
        for shard in (1, 2):
            for tenant in placed[shard]:
                wait_until_recallable(deployment, tenant, f"{tenant} keeps note 4", timeout_s=120)
        assert not dead.answers()
        for shard in (1, 2):  # the other shards' tenants recall as before
            for tenant in placed[shard]:
                assert len(stores(tenant).search("lighthouse note", k=10)) >= 2
        for tenant in placed[0]:
            # The dead shard's tenants: an InfrastructureError, which the middleware turns
            # into the seed's skip (the turn goes on, Skipped announced).
            with pytest.raises(RedisUnavailableError):
                stores(tenant).search("lighthouse note", k=10)

        shown = memstream(sharded_env, "stats", "--json")
        assert shown.returncode == 1
        reachable = [row["reachable"] for row in json.loads(shown.stdout)["shards"]]
        assert reachable == [False, True, True]

        dead.start(tmp_path / "shard-0", "--appendonly", "yes")  # from its own files
        wait_until(dead.answers, "the killed shard to come back")
        everything = first + later + fresh
        wait_projected(status, everything, "the shard healed")
        keys = Keyspace(settings.namespace).at(1)
        for shard, own in placed.items():
            for tenant in own:
                sent = 4 if shard == 0 else 5
                assert shards[shard].client().zcard(keys.order(tenant)) == sent  # none lost
                assert shards[shard].client().hlen(keys.applied(tenant)) == sent
                assert len(deployment.reader().memories(tenant)) == sent  # none doubled


@contextlib.contextmanager
def redises(tmp_path: Path, count: int, name: str) -> Iterator[list[OwnRedis]]:
    """`count` Redis of the test's own, without persistence, stopped on the way out."""
    own = [OwnRedis(tmp_path) for _ in range(count)]
    try:
        for n, redis in enumerate(own):
            redis.start(tmp_path / f"{name}-{n}")
        for redis in own:
            wait_until(redis.answers, f"shard Redis on port {redis.port}")
        yield own
    finally:
        for redis in own:
            redis.stop()


@pytest.fixture
def four(tmp_path: Path) -> Iterator[list[OwnRedis]]:
    with redises(tmp_path, 4, "reshard") as started:
        yield started


def test_reshard_online_from_one_to_two_to_four_shards(
    env: dict[str, str], four: list[OwnRedis], tmp_path: Path
) -> None:
    """Turns stream in and recall runs for every tenant through both moves: no recall fails,
    and at the end each tenant's memories sit on its shard of the 4-shard layout only, each
    event applied once."""
    own = {
        **env,
        "MEMSTREAM_NAMESPACE": f"test-reshard-{uuid.uuid4().hex[:8]}",
        "MEMSTREAM_PARTITIONS": "4",
        "MEMSTREAM_REDIS_SHARDS": four[0].url,  # one shard to start with
        "MEMSTREAM_MAX_MEMORIES": "0",
    }
    settings = Settings.from_env(own)
    stack = TestStack(settings)
    tenants = []
    n = 0
    while len({partition_of(t, 4) for t in tenants}) < 4 or len(tenants) < 8:
        tenants.append(f"reshard-tenant-{n}")
        n += 1
    published: list[MemoryEvent] = []
    errors: list[BaseException] = []
    recalls = 0
    stop = threading.Event()

    with running_worker(own, tmp_path / "worker.log"), Deployment(settings) as deployment:
        stores = deployment.stores()

        def stream() -> None:
            round_ = 0
            while not stop.is_set():
                batch = [recorded(stack, tenant, round_) for tenant in tenants]
                stack.publish(batch)
                published.extend(batch)
                round_ += 1
                stop.wait(0.5)  # a steady trickle of turns, not a flood for the embedder

        def recall() -> None:
            nonlocal recalls
            while not stop.is_set():
                for tenant in tenants:
                    try:
                        stores(tenant).search("lighthouse note", k=5)
                        recalls += 1
                    except BaseException as exc:  # noqa: BLE001 - every failure is the finding
                        errors.append(exc)

        threads = [threading.Thread(target=stream), threading.Thread(target=recall)]
        for thread in threads:
            thread.start()
        try:
            status = deployment.status()
            wait_until(lambda: len(published) >= 3 * len(tenants), "turns streaming in")
            two = memstream(own, "reshard", "--to", f"{four[0].url},{four[1].url}")
            assert two.returncode == 0, two.stderr
            print(two.stdout)
            everything = ",".join(redis.url for redis in four)
            four_shards = memstream(own, "reshard", "--to", everything)
            assert four_shards.returncode == 0, four_shards.stderr
            print(four_shards.stdout)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
        wait_projected(status, published, "every turn projected")
        assert deployment.projection.current_layout().version == 3

    assert errors == []
    assert recalls > 0
    keys = Keyspace(settings.namespace).at(1)
    for tenant in tenants:
        sent = sum(1 for event in published if event.tenant == tenant)
        home = partition_of(tenant, 4) % 4
        assert four[home].client().zcard(keys.order(tenant)) == sent  # none lost, none doubled
        assert four[home].client().hlen(keys.applied(tenant)) == sent
        for other, redis in enumerate(four):
            if other != home:  # moved data dropped from the old shards
                assert list(redis.client().scan_iter(match=f"*{tenant_token(tenant)}*")) == []


@pytest.fixture
def two(tmp_path: Path) -> Iterator[list[OwnRedis]]:
    with redises(tmp_path, 2, "sessions") as started:
        yield started


def test_reshard_carries_working_memory_with_its_version_and_ttl(
    env: dict[str, str], two: list[OwnRedis]
) -> None:
    """Sessions are state, not in the log: a reshard 1 -> 2 copies the moving tenants'
    sessions (document, version, remaining TTL, index and owner) to the new shard, keeps a
    session put on the old shard after the switch (a process still routing by the old
    layout), and leaves the old shard none of them; the staying tenants' sessions stay."""
    own = {
        **env,
        "MEMSTREAM_NAMESPACE": f"test-wm-reshard-{uuid.uuid4().hex[:8]}",
        "MEMSTREAM_PARTITIONS": "4",
        "MEMSTREAM_REDIS_SHARDS": two[0].url,
    }
    settings = Settings.from_env(own)
    tenants = [f"wm-tenant-{n}" for n in range(12)]
    moving = [t for t in tenants if partition_of(t, 4) % 2 == 1]
    staying = [t for t in tenants if partition_of(t, 4) % 2 == 0]
    assert moving and staying
    keys = Keyspace(settings.namespace)
    late = moving[0]

    with Deployment(settings) as deployment:
        try:
            asyncio.run(deployment.ensure_topics())

            def put(
                tenant: str, session: str, said: str, version: int, ttl: int | None, owner: str
            ) -> None:
                """A put on the old shard's store (a server still routing by layout 1)."""
                store = deployment.projection.shard(two[0].url).working_memory()
                document = json.dumps({"said": said})
                asyncio.run(
                    _closing(
                        store,
                        store.put(
                            tenant,
                            session,
                            document,
                            expected_version=version,
                            ttl_s=ttl,
                            owner=owner,
                        ),
                    )
                )

            for tenant in tenants:
                put(tenant, "a", f"{tenant} a1", 0, 3600, "ann")
                put(tenant, "a", f"{tenant} a2", 1, 3600, "ann")
                put(tenant, "b", f"{tenant} b1", 0, None, "bob")

            def during(line: str) -> None:
                if "layout 2 stored" in line:
                    put(late, "a", "late", 2, 3600, "ann")
                    put(late, "c", "new", 0, 600, "ann")

            done = reshard(deployment, [two[0].url, two[1].url], say=during)
            assert done.moved == (1, 3)

            def get(tenant: str, session: str) -> StoredSession | None:
                routed = deployment.projection.working_memory()
                return asyncio.run(_closing(routed, routed.get(tenant, session)))

            def listed(tenant: str, owner: str | None) -> tuple[int, list[str]]:
                routed = deployment.projection.working_memory()
                listing = routed.sessions(tenant, owner=owner, offset=0, limit=10)
                return asyncio.run(_closing(routed, listing))

            new, home = two[1].client(), two[0].client()
            for tenant in moving:
                versions = {"a": 3 if tenant == late else 2, "b": 1}
                if tenant == late:
                    versions["c"] = 1
                for session, version in versions.items():
                    stored = get(tenant, session)
                    assert stored is not None and stored.version == version
                said = json.loads(get(tenant, "a").document)["said"]  # type: ignore[union-attr]
                assert said == ("late" if tenant == late else f"{tenant} a2")
                assert 0 < new.pttl(keys.session(tenant, "a")) <= 3600 * 1000
                assert new.pttl(keys.session(tenant, "b")) == -1  # no TTL stays none
                assert listed(tenant, "ann") == (
                    len(versions) - 1,
                    sorted(s for s in versions if s != "b"),
                )
                assert list(home.scan_iter(match=f"*:wm:{tenant_token(tenant)}:*")) == []
            assert 0 < new.pttl(keys.session(late, "c")) <= 600 * 1000
            for tenant in staying:
                assert get(tenant, "a").version == 2  # type: ignore[union-attr]
                assert listed(tenant, None) == (2, ["a", "b"])
                assert list(new.scan_iter(match=f"*:wm:{tenant_token(tenant)}:*")) == []
        finally:
            drop(deployment)


async def _closing(store: WorkingMemoryStore, call: Awaitable[T]) -> T:
    """`call`'s answer, then `store` closed: its asyncio client belongs to this one loop."""
    try:
        return await call
    finally:
        await store.aclose()
