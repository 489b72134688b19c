"""A projection that lost acknowledged writes heals itself: Redis restarted on an older copy of
its data gets the missing memories back from the log, without a replay and without doubles."""

from __future__ import annotations

import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstream import MessageRecorded, Settings
from memstream.deployment import Deployment
from memstream.operations import drop

from .helpers import OwnRedis, TestStack, start_worker, wait_until

pytestmark = pytest.mark.integration

TENANTS = 3
PER_BATCH = 45


def test_redis_restarted_on_an_older_copy_gets_the_missing_memories_back(
    env: dict[str, str], tmp_path: Path
) -> None:
    server = OwnRedis(tmp_path)
    live, copy = tmp_path / "live", tmp_path / "copy"
    heal_env = env | {
        "MEMSTREAM_NAMESPACE": f"heal-{uuid.uuid4().hex[:8]}",
        "MEMSTREAM_REDIS_URL": server.url,
        "MEMSTREAM_MAX_MEMORIES": "0",
    }
    settings = Settings.from_env(heal_env)
    stack = TestStack(settings)
    tenants = [f"heal-{n}" for n in range(TENANTS)]
    at = datetime.now(UTC)
    events = [
        MessageRecorded(
            tenants[n % TENANTS], "t", f"h{n}", f"fact {n}", "u", at, 0.5, stack.model_id
        )
        for n in range(3 * PER_BATCH)
    ]
    saved, lost, later = (events[i * PER_BATCH : (i + 1) * PER_BATCH] for i in range(3))
    log = tmp_path / "worker.log"
    with server.running(live):
        worker = start_worker(heal_env, log)
        try:
            stack.wait_until_projecting(worker, log)
            stack.publish(saved)
            stack.wait_applied(saved)
            server.client().save()  # the copy: what an fsync-lagging Redis still had
            shutil.copytree(live, copy)
            stack.publish(lost)
            stack.wait_applied(lost)  # applied, and committed to Kafka soon after

            server.stop()  # a crash: no save on the way down
            server.start(copy)
            wait_until(server.answers, "Redis to come back on the copy")
            # Nothing is published meanwhile: the worker notices on its own.
            stack.wait_applied(saved + lost)
            assert "Redis lost writes" in log.read_text()  # it was behind, and healed
            stack.publish(later)
            stack.wait_applied(later)
            assert worker.poll() is None

            keys = stack.status.live()
            for tenant in tenants:
                mine = {e.id for e in events if e.tenant == tenant}
                markers = {k.decode() for k in stack.redis.hkeys(keys.applied(tenant))}
                assert markers == mine, tenant
                assert stack.stored_memories(tenant) == len(mine), tenant  # none doubled
                assert int(stack.redis.zcard(keys.order(tenant))) == len(mine), tenant
        finally:
            worker.terminate()
            worker.wait(timeout=60)
            drop(Deployment(settings))  # the test's Redis, and the namespace's topics
