"""Dead letters come back: listed without their content, counted in `status` and `stats`,
and re-driven once the cause is fixed, each event applied once, on the real stack.

The cause here is the commonest one: a worker of a build that does not know an event type
(a producer upgraded before the workers) dead-letters it; the fix is a worker of today's build.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstream import MessageRecorded, Settings
from memstream.deployment import Deployment
from memstream.memory.model import Memory
from memstream.operations import drop
from memstream.processes import running

from .commands import memstream
from .helpers import TestStack, running_worker, wait_until

pytestmark = pytest.mark.integration

# A worker of a build that predates MessageRecorded: it reads every other type.
_OLD_BUILD = (
    "from memstream.memory.events import REGISTRY; REGISTRY._by_name.pop('MessageRecorded'); "
    "from memstream.cli.main import main; raise SystemExit(main(['worker']))"
)


@pytest.fixture
def letters_env(env: dict[str, str]) -> Iterator[dict[str, str]]:
    own = env | {"MEMSTREAM_NAMESPACE": f"dl-{uuid.uuid4().hex[:8]}"}
    yield own
    drop(Deployment(Settings.from_env(own)))


def message(stack: TestStack, tenant: str, n: int) -> MessageRecorded:
    return MessageRecorded(
        tenant, "support", f"m{n}", f"The locker {n} code is {4000 + n}.", "agent",
        datetime.now(UTC), 0.5, stack.model_id,
    )  # fmt: skip


def pending(env: dict[str, str]) -> list[dict[str, object]]:
    listed = memstream(env, "dead-letters", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return [json.loads(line) for line in listed.stdout.splitlines()]


def test_dead_letters_are_listed_counted_and_retried_once_each_after_the_fix(
    letters_env: dict[str, str], tmp_path: Path
) -> None:
    stack = TestStack(Settings.from_env(letters_env))
    a, b = "tenant-a", "tenant-b"
    messages = [message(stack, a, 1), message(stack, a, 2), message(stack, b, 3)]
    turn = stack.turn(a, "Who approves refunds?", "Priya.")
    probe = stack.turn("__probe__", "up?", "yes")
    asyncio.run(Deployment(stack.settings).ensure_topics())
    stack.publish([probe])
    old_build = running(
        [sys.executable, "-c", _OLD_BUILD],
        env=letters_env,
        log=tmp_path / "old-worker.log",
        ready=lambda: not stack.status.unapplied([probe]),
        what="the old build's worker",
    )
    with old_build:
        stack.publish([*messages, turn])
        stack.publish_raw(a.encode(), b"{oops")
        stack.wait_applied([turn])
        wait_until(lambda: len(pending(letters_env)) == 4, "four dead letters")

    rows = pending(letters_env)
    assert sorted(str(r["code"]) for r in rows) == ["event_decode", *["unknown_event_type"] * 3]
    assert {str(r["tenant"]) for r in rows} == {a, b}
    assert all(str(r["source"]).startswith(f"{stack.topics.memory}/") for r in rows)
    shown = memstream(letters_env, "dead-letters", "list")
    assert "4 pending of 4 dead letters" in shown.stdout
    assert not any(m.content in shown.stdout for m in messages)  # never the message itself
    only = memstream(
        letters_env, "dead-letters", "list", "--code", "unknown_event_type", "--tenant", a
    )
    assert only.stdout.count("unknown_event_type") == 2 and f"tenant={b!r}" not in only.stdout
    # The servers named, as for a deployment of its own (status then asks them whoever
    # started them).
    servers = {"MEMSTREAM_KAFKA_BOOTSTRAP": stack.settings.bootstrap_servers,
               "MEMSTREAM_REDIS_URL": stack.settings.redis}  # fmt: skip
    for command in ("status", "stats"):
        said = memstream(letters_env | servers, command)
        assert "dead letters pending: 4 (1 event_decode, 3 unknown_event_type)" in said.stdout

    with running_worker(letters_env, tmp_path / "worker.log"):  # the fix lands
        retried = memstream(
            letters_env, "dead-letters", "retry", "--code", "unknown_event_type", "--tenant", a
        )
        assert retried.returncode == 0, retried.stdout + retried.stderr
        assert "retried 2 dead letters: 2 applied" in retried.stdout
        assert sorted(m.content for m in stack_memories(stack, a)) == sorted(
            [messages[0].content, messages[1].content, turn.query, turn.answer]
        )

        # A replay reads b's message where the log holds it: the retry then finds it applied.
        replayed = memstream(letters_env, "replay", "--allow-dead-letters")
        assert replayed.returncode == 0, replayed.stderr
        again = memstream(letters_env, "dead-letters", "retry")
        assert again.returncode == 1  # the junk is refused again
        assert "retried 2 dead letters: 1 already_applied, 1 failed" in again.stdout

    assert [m.content for m in stack_memories(stack, b)] == [messages[2].content]
    assert stack.stored_memories(a) == 4  # each event applied once
    (left,) = pending(letters_env)
    assert left["code"] == "event_decode" and left["tenant"] == a
    assert "1 pending of 5 dead letters" in memstream(letters_env, "dead-letters", "list").stdout

    notices = [
        json.loads(r.value)
        for r in stack.read_topic(
            stack.topics.monitoring,
            lambda rs: sum(b'"DeadLetterRetried"' in (r.value or b"") for r in rs) >= 4,
        )
        if b'"DeadLetterRetried"' in (r.value or b"")
    ]
    assert sorted(n["outcome"] for n in notices) == [
        "already_applied", "applied", "applied", "failed"
    ]  # fmt: skip
    assert [n["new_code"] for n in notices if n["outcome"] == "failed"] == ["event_decode"]


def stack_memories(stack: TestStack, tenant: str) -> list[Memory]:
    return Deployment(stack.settings).reader().memories(tenant)
