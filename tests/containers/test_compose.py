"""infra/compose.yaml as a deployment: up with two workers, an API key made with the image's
CLI, an import through the server, recall; a worker container killed and removed while writes
go on, and replaced by a new one; down and up again on the same volumes — every record
readable at each step; down; then down with the volumes, leaving nothing."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memstream.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "infra" / "compose.yaml"
DEADLINE_S = 180.0


def compose_command() -> list[str]:
    """podman-compose from the checkout's .venv (infra/images/podman.sh), else `docker compose`."""
    own = ROOT / ".venv" / "bin" / "podman-compose"
    if own.exists():
        return [str(own)]
    if shutil.which("docker"):
        return ["docker", "compose"]
    pytest.fail("no compose tool: run infra/images/podman.sh (podman-compose) or install Docker")


class Compose:
    def __init__(self, env: dict[str, str]) -> None:
        self.project = f"mstest{uuid.uuid4().hex[:8]}"
        self.env = env
        self.server = f"http://127.0.0.1:{env['MEMSTREAM_SERVER_PORT']}"

    def __call__(self, *args: str, timeout: float = DEADLINE_S) -> str:
        command = [*compose_command(), "-p", self.project, "-f", str(COMPOSE_FILE), *args]
        done = subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        assert done.returncode == 0, (
            f"{' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        return done.stdout

    def containers(self, engine: Any, service: str) -> list[Any]:
        return [
            c
            for c in engine.containers.list(all=True)
            if c.labels.get("com.docker.compose.project") == self.project
            and c.labels.get("com.docker.compose.service") == service
        ]


def wait_until(condition: Any, what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if condition():
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


@pytest.fixture
def compose(engine: Any) -> Iterator[Compose]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    env |= {
        "MEMSTREAM_MASTER_KEY": base64.b64encode(os.urandom(32)).decode(),
        "MEMSTREAM_NAMESPACE": f"compose-{uuid.uuid4().hex[:8]}",
        "MEMSTREAM_PARTITIONS": "2",
        "MEMSTREAM_KAFKA_PORT": str(free_port()),
        "MEMSTREAM_REDIS_PORT": str(free_port()),
        "MEMSTREAM_SERVER_PORT": str(free_port()),
    }
    stack = Compose(env)
    try:
        yield stack
    finally:
        # The test ends with `down`; this one drops the volumes. (podman-compose 1.6's `down -v`
        # on running containers was seen to leave the volumes behind, in use while it removed
        # them; once the containers are gone it removes them.)
        stack("down", "-v", "--remove-orphans", "-t", "5")
        assert not [
            c.name
            for c in engine.containers.list(all=True)
            if c.labels.get("com.docker.compose.project") == stack.project
        ], "down left containers behind"
        volumes = [v.name for v in engine.volumes.list() if v.name.startswith(stack.project)]
        assert volumes == [], "down -v left volumes behind"


def records(tenant: str, start: int, count: int) -> list[dict[str, str]]:
    return [
        {
            "id": f"{tenant}-{n}",
            "text": f"Fact {n} of {tenant}: the code word is w{n}x.",
            "namespace": tenant,
        }
        for n in range(start, start + count)
    ]


def all_recallable(http: httpx.Client, written: list[dict[str, str]]) -> bool:
    for record in written:
        found = http.get(
            f"/v1/long-term-memory/{record['id']}", params={"namespace": record["namespace"]}
        )
        if found.status_code != 200 or found.json()["text"] != record["text"]:
            return False
    return True


def test_a_compose_deployment_loses_nothing_when_a_worker_dies(
    compose: Compose, engine: Any
) -> None:
    compose("up", "-d", "--scale", "worker=2")
    assert len(compose.containers(engine, "worker")) == 2

    # The server exits while no key exists; the image's CLI makes one on the same network,
    # and `up` starts the server again.
    out = compose("--profile", "cli", "run", "--rm", "cli", "keys", "create", "--admin")
    key = next(line for line in out.splitlines() if line.startswith("msk_"))
    compose("up", "-d", "--scale", "worker=2")
    http = httpx.Client(
        base_url=compose.server, headers={"Authorization": f"Bearer {key}"}, timeout=60
    )
    wait_until(lambda: http.get("/v1/health").status_code == 200, "the server")

    tenants = [f"acme-{uuid.uuid4().hex[:6]}", f"globex-{uuid.uuid4().hex[:6]}"]
    written: list[dict[str, str]] = []
    for tenant in tenants:
        batch = records(tenant, 0, 10)
        answer = http.post("/v1/long-term-memory/?wait=true", json={"memories": batch})
        assert answer.status_code == 200, answer.text
        written += batch
    for tenant in tenants:
        found = http.post(
            "/v1/long-term-memory/search",
            json={"text": "code word w3x", "namespace": {"eq": tenant}},
        ).json()["memories"]
        assert found and found[0]["text"] == f"Fact 3 of {tenant}: the code word is w3x."
        assert all(m["namespace"] == tenant for m in found)

    # Each worker beats in Redis under its own container name: the readiness probe says so.
    for worker in compose.containers(engine, "worker"):
        code, output = worker.exec_run(["memstream", "probe", "worker"])
        assert code == 0, output

    victim = compose.containers(engine, "worker")[0]
    victim.kill()
    victim.remove()
    for tenant in tenants:
        batch = records(tenant, 10, 10)
        answer = http.post("/v1/long-term-memory/", json={"memories": batch})
        assert answer.status_code == 200, answer.text
        written += batch
    compose("up", "-d", "--scale", "worker=2")
    workers = compose.containers(engine, "worker")
    assert victim.id not in {c.id for c in workers}
    assert [c.status for c in workers] == ["running", "running"]
    wait_until(lambda: all_recallable(http, written), "every record after the worker was replaced")

    compose("down", "--remove-orphans", "-t", "5")
    assert compose.containers(engine, "worker") == []
    compose("up", "-d", "--scale", "worker=2")
    wait_until(lambda: http.get("/v1/health").status_code == 200, "the server after a restart")
    wait_until(lambda: all_recallable(http, written), "every record after down and up")
    http.close()
    compose("down", "--remove-orphans", "-t", "5")
    assert compose.containers(engine, "worker") == []
