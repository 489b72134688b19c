"""One broker of three SIGKILLed, and every command that talks to Kafka run the instant after,
all at once, before the cluster has fenced the dead broker or moved anything off it: each
succeeds, and what was written meanwhile is projected exactly once after the broker returns.

The cluster is the module's own (`memstream up --brokers 3 --shards 3`: RF=3,
min.insync.replicas=2). Each broker is killed in turn, the active controller first; each
time, at once and together:

- `import`, the agent's hook (turns through the middleware's background publisher) and
  `serve` started then, with writes through it;
- the worker SIGKILLed too and a new one started (a start and a restart of the group);
- `replay`, `verify`, `forget`, `dead-letters list` and `retry`, `reshard` (shards 1 and 2
  swap), `keys` (create, list, revoke), `erasure rewrap` and `encrypt`, `stats`, `status`,
  `probe stack` and `tail`.

Marked `cluster` (`make test-cluster`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from memstream import Settings
from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.cli.stack import LocalStack
from memstream.deployment import Deployment
from memstream.hooks import RecordConfig, SemanticMemoryMiddleware
from memstream.memory.tenancy import tenant_key as record_key

from .clusters import active_controller, in_sync, local_cluster, projecting
from .commands import memstream_process
from .helpers import TestStack, start_worker, stop_worker, wait_until, worker_stacks
from .serving import serving, tenant_key

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

BROKERS = 3
SHARDS = 3
PARTITIONS = 6
TURNS = 4  # per writer and round: imported, hooked, served
_SLOW_S = 180.0


@pytest.fixture(scope="module")
def cluster(
    env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, str], LocalStack, Path]]:
    state = tmp_path_factory.mktemp("broker-loss") / "stack"
    with (
        local_cluster(
            env,
            state,
            BROKERS,
            SHARDS,
            MEMSTREAM_PARTITIONS=str(PARTITIONS),
            MEMSTREAM_MAX_MEMORIES="0",  # unbounded: every memory stays to be counted
            MEMSTREAM_WORKER_SESSION_TIMEOUT="6",
            MEMSTREAM_NAMESPACE=f"loss-{uuid.uuid4().hex[:8]}",
        ) as (own, local)
    ):
        yield own, local, state


class Writes:
    """What the round's writers had acknowledged, tenant by tenant: memories expected."""

    def __init__(self) -> None:
        self.memories: Counter[str] = Counter()
        self.records: Counter[str] = Counter()  # records in the memory topic
        self._lock = threading.Lock()

    def add(self, tenant: str, memories: int, records: int) -> None:
        with self._lock:
            self.memories[tenant] += memories
            self.records[tenant] += records


def _imported(folder: Path, tenant: str, writes: Writes) -> Path:
    path = folder / f"{tenant}.jsonl"
    lines = [
        json.dumps({"tenant": tenant, "thread": "import", "query": f"q{n}", "answer": f"a{n}"})
        for n in range(TURNS)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _hook(deployment: Deployment, tenant: str) -> int:
    """TURNS agent turns of `tenant` through the middleware; the turns answered."""
    memory = SemanticMemoryMiddleware(
        stores=deployment.stores(), client=ScriptedModel([]), record=RecordConfig()
    )
    agent = Agent(ScriptedModel(["Noted."] * TURNS), middleware=[memory])
    done = 0
    for n in range(TURNS):
        result = agent.run(f"hooked turn {n}", RunConfig(f"{tenant}-{n}", tenant))
        done += result.status == "completed"
    return done


def _served(env: dict[str, str], log: Path, key: str, tenant: str) -> list[int]:
    """`memstream serve` started now, and TURNS memories written through it; the statuses."""
    statuses = []
    with serving(env, log) as url:
        for n in range(TURNS):
            answer = httpx.post(
                f"{url}/v1/long-term-memory/",
                headers={"Authorization": f"Bearer {key}"},
                json={"memories": [{"id": f"{tenant}-{n}", "text": f"served fact {n}"}]},
                timeout=60,
            )
            statuses.append(answer.status_code)
    return statuses


def _timed(job: Callable[[], object]) -> tuple[object, float]:
    started = time.monotonic()
    return job(), time.monotonic() - started


def test_every_command_works_the_instant_a_broker_dies_and_nothing_is_lost_or_doubled(
    cluster: tuple[dict[str, str], LocalStack, Path], tmp_path: Path
) -> None:
    env, local, state = cluster
    settings = Settings.from_env(env)
    stack = TestStack(settings)
    deployment = Deployment(settings)
    shard_urls = list(settings.shard_urls)
    writes = Writes()
    asyncio.run(deployment.ensure_topics())
    quiet = "quiet"  # replayed and verified each round; written before the first
    stack.publish([stack.turn(quiet, f"quiet fact {n}", "noted") for n in range(3)])
    writes.add(quiet, 6, 3)
    worker_log = tmp_path / "worker.log"
    worker = start_worker(env, worker_log)
    # A message no build can read: a dead letter each round's retry refuses again.
    stack.publish_raw(record_key("letters"), b"not an event")
    killed: list[int] = []
    try:
        projecting(deployment, worker, worker_log)
        wait_until(
            lambda: "dead letters pending: 1" in memstream_process(env, "stats").stdout,
            "the unreadable message to be dead-lettered",
            _SLOW_S,
        )
        for round_ in range(BROKERS):
            controller = active_controller(state)
            victim = controller if not killed else min(set(range(1, 4)) - set(killed))
            pid = local.pid(f"kafka-{victim}")
            assert pid is not None
            # Before the kill: what this round forgets, and the keys it lists and revokes.
            forgetful = f"forget-{round_}"
            stack.publish(
                [
                    stack.turn(forgetful, "forget me", "ok", thread="gone"),
                    stack.turn(forgetful, "keep me", "ok", thread="kept"),
                ]
            )
            writes.add(forgetful, 2, 3)  # the kept turn; the forget is a record too
            wait_until(
                lambda t=forgetful: len(deployment.reader().memories(t)) == 4,
                "the turns to forget",
                _SLOW_S,
            )
            server_tenant = f"served-{round_}"
            server_key = tenant_key(env, server_tenant)
            revoked = tenant_key(env, f"revoked-{round_}")
            swapped = [shard_urls[0], *reversed(shard_urls[1:])] if round_ % 2 == 0 else shard_urls
            imports = _imported(tmp_path, f"imported-{round_}", writes)
            hooked = f"hooked-{round_}"

            os.kill(pid, signal.SIGKILL)  # a crash; nothing below waits for the cluster
            killed.append(victim)
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait()
            worker = start_worker(env, worker_log)  # its successor, started at once

            commands: dict[str, tuple[str, ...]] = {
                "import": ("import", str(imports)),
                "replay": ("replay", "--tenant", quiet),
                "verify": ("verify", "--tenant", quiet, "--timeout", "120"),
                "forget": ("forget", "--tenant", forgetful, "--thread", "gone"),
                "dead-letters list": ("dead-letters", "list"),
                "dead-letters retry": ("dead-letters", "retry"),
                "reshard": ("reshard", "--to", ",".join(swapped), "--timeout", "120"),
                "keys create": ("keys", "create", "--tenant", f"keyed-{round_}"),
                "keys list": ("keys", "list"),
                "keys revoke": ("keys", "revoke", revoked),
                "erasure rewrap": ("erasure", "rewrap"),
                "erasure encrypt": (
                    "erasure",
                    "encrypt",
                    "--to",
                    f"sealed-{uuid.uuid4().hex[:6]}",
                    "--allow-dead-letters",  # the unreadable message is not copied
                ),
                "stats": ("stats",),
                "status": ("status",),
                "probe": ("probe", "stack"),  # a container's health check
                "tail": ("tail", "--from-beginning", "--max", "1", "--timeout", "60"),
            }
            jobs: dict[str, Callable[[], object]] = {
                name: (lambda args=args: memstream_process(env, *args, timeout=_SLOW_S))
                for name, args in commands.items()
            }
            jobs["hook"] = lambda t=hooked: _hook(deployment, t)
            serve_log = tmp_path / f"serve-{round_}.log"
            jobs["serve"] = lambda t=server_tenant, k=server_key, log=serve_log: _served(
                env, log, k, t
            )
            started = time.monotonic()
            with ThreadPoolExecutor(len(jobs)) as pool:
                futures = {name: pool.submit(_timed, job) for name, job in jobs.items()}
                done = {name: future.result()[0] for name, future in futures.items()}
                took = {name: future.result()[1] for name, future in futures.items()}
            assert local.pid(f"kafka-{victim}") is None  # all of it with the broker down

            failed = {
                name: f"exit {result.returncode}:\n{result.stdout[-1500:]}\n{result.stderr[-3000:]}"
                for name, result in done.items()
                if isinstance(result, subprocess.CompletedProcess)
                and result.returncode != _EXPECTED_STATUS.get(name, 0)
            }
            for name, why in failed.items():
                print(f"--- {name}, kafka-{victim} down (controller {controller}): {why}")
            assert not failed, f"kafka-{victim} down: {sorted(failed)} failed (printed above)"
            assert done["hook"] == TURNS
            assert done["serve"] == [200] * TURNS, done["serve"]
            status = done["status"]
            assert isinstance(status, subprocess.CompletedProcess)
            assert f"kafka-{victim}: stopped" in status.stdout, status.stdout
            retried = done["dead-letters retry"]
            assert isinstance(retried, subprocess.CompletedProcess)
            # The unreadable message, refused again (a restarted worker may have refused it
            # once more before its commit: a letter of the same message).
            assert re.search(r"retried ([1-9]\d*) dead letters: \1 failed", retried.stdout), (
                retried.stdout
            )
            writes.add(f"imported-{round_}", 2 * TURNS, TURNS)
            writes.add(hooked, 2 * TURNS, TURNS)
            writes.add(server_tenant, TURNS, TURNS)
            # docs/operations.md's figures, shown with -s.
            slowest = sorted(took.items(), key=lambda item: -item[1])
            print(
                f"kafka-{victim} killed (active controller: {controller}): all done "
                f"{time.monotonic() - started:.1f}s after; "
                + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in slowest)
            )

            local.up(brokers=BROKERS, shards=SHARDS, say=lambda _: None)  # it alone
            in_sync(stack.kafka, stack.topics.memory, BROKERS)
            assert worker.poll() is None, worker_log.read_text()[-3000:]

        assert killed[0] != killed[1] != killed[2] != killed[0]

        def converged() -> bool:
            assert worker.poll() is None, worker_log.read_text()[-3000:]
            return all(
                len(deployment.reader().memories(tenant)) == count
                for tenant, count in writes.memories.items()
            )

        wait_until(converged, "every write to be projected", _SLOW_S)
        records = stack.read_whole(stack.topics.memory)
    except BaseException:
        print(f"--- the worker's log, with its stacks:\n{worker_stacks(worker, worker_log)}")
        raise
    finally:
        deployment.close()
        stop_worker(worker, worker_log)

    logged = Counter(record.key for record in records)
    for tenant, count in writes.memories.items():
        assert len(deployment.reader().memories(tenant)) == count, tenant  # none lost/doubled
        assert logged[record_key(tenant)] == writes.records[tenant], tenant  # once in the log
    for round_ in range(BROKERS):
        kept = deployment.reader().memories(f"forget-{round_}")
        assert {m.thread for m in kept} == {"kept"}, kept


# `status` says a broker is down by its exit status; `dead-letters retry` that the letter it
# retried failed again (it is unreadable by design).
_EXPECTED_STATUS = {"status": 1, "dead-letters retry": 1}
