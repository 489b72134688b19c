"""Every release's log, replayed with today's defaults: the log is the truth.

Each folder of tests/fixtures/logs/ holds what one release wrote to Kafka for a fixed workload
(recorded by tests/fixtures/logs/record.py with that release's code: the memory topic, the
keys topic) and the memories its projection then held. Here kafka-python, a client other than
memstream's, produces those records byte for byte into a fresh namespace; a worker with default
settings (today's embedder, whatever model the events name) must project them to exactly those
memories, ids included, and `memstream verify` must find the rebuild equal.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer

from memstream import Settings
from memstream.deployment import Deployment
from memstream.operations import drop, projection_lag
from tests.fixtures.logs.record import projected

from .commands import memstream
from .helpers import running_worker, wait_until

pytestmark = pytest.mark.integration

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
RELEASES = sorted(folder.name for folder in LOGS.iterdir() if (folder / "memory.jsonl").exists())


def records(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def produce(deployment: Deployment, folder: Path) -> None:
    """The release's records, as it wrote them: keys first (a data key is always in its
    topic before any event sealed under it), then the memory log."""
    kafka = KafkaProducer(bootstrap_servers=deployment.settings.bootstrap_servers, acks="all")
    with kafka:
        for topic, name in ((deployment.topics.keys, "keys.jsonl"),
                            (deployment.topics.memory, "memory.jsonl")):  # fmt: skip
            for record in records(folder / name):
                value = record["value"]
                kafka.send(
                    topic,
                    None if value is None else str(value).encode("utf-8"),
                    key=str(record["key"]).encode("utf-8"),
                    timestamp_ms=int(str(record["timestamp_ms"])),
                    headers=[(k, v.encode()) for k, v in record.get("headers", [])],  # type: ignore[attr-defined]
                )
        kafka.flush()


@pytest.fixture(params=RELEASES)
def release(
    request: pytest.FixtureRequest, env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[Path, dict[str, str]]]:
    folder = LOGS / request.param
    own = {key: value for key, value in env.items() if key != "MEMSTREAM_EMBEDDER"}
    own |= {"MEMSTREAM_NAMESPACE": f"golden-{request.param}-{uuid.uuid4().hex[:6]}"}
    if (folder / "master.key").exists():
        own["MEMSTREAM_MASTER_KEY"] = (folder / "master.key").read_text().strip()
    yield folder, own
    drop(Deployment(Settings.from_env(own)))


def test_every_release_log_projects_exactly_with_default_settings(
    release: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    folder, env = release
    deployment = Deployment(Settings.from_env(env))
    assert "MEMSTREAM_EMBEDDER" not in env  # today's default embedder
    expected = json.loads((folder / "memories.json").read_text())
    with running_worker(env, tmp_path / "worker.log"):
        produce(deployment, folder)
        wait_until(
            lambda: not any(projection_lag(deployment).values()),
            f"the {folder.name} log to be projected",
        )
        assert projected(deployment, list(expected)) == expected

    letters = memstream(env, "dead-letters", "list")
    assert letters.returncode == 0, letters.stderr
    assert "0 pending of 0 dead letters" in letters.stdout
    verified = memstream(env, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "equals the rebuild" in verified.stderr

    # What a turn was shown (TurnCompleted v3, from 0.4.0): `explain` reads it back, traced to
    # the turn whose write it saw. `shown`, like every id, travels in clear.
    bodies = [json.loads(str(r["value"])) for r in records(folder / "memory.jsonl") if r["value"]]
    for body in (b for b in bodies if b.get("shown")):
        explained = memstream(
            env, "explain", "--tenant", body["tenant"], "--run", body["run"],
            "--turn", str(body["turn"]), "--json",
        )  # fmt: skip
        assert explained.returncode == 0, explained.stderr
        (turn,) = json.loads(explained.stdout)
        assert [s["id"] for s in turn["shown"]] == body["shown"]
        assert all(s["provenance"]["event_type"] == "TurnCompleted" for s in turn["shown"])
