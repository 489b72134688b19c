"""The deployment files are checked, not just written: the Kubernetes manifests of
docs/deploy.md against the Kubernetes schemas (kubernetes-validate ships them; nothing is
downloaded), and against memstream itself (the probe command, the exported lag metric, the
partition ceiling); infra/compose.yaml passes every setting on."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from memstream.cli.main import build_parser
from memstream.config import Settings
from memstream.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = "1.33.0"


def manifests() -> list[dict[str, Any]]:
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    return [doc for block in blocks for doc in yaml.safe_load_all(block) if doc]


def by_kind(kind: str, name: str) -> dict[str, Any]:
    found = [m for m in manifests() if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} manifests"
    return found[0]


@pytest.mark.parametrize(
    "manifest", manifests(), ids=lambda m: f"{m['kind']}/{m['metadata']['name']}"
)
def test_each_manifest_is_valid_kubernetes(manifest: dict[str, Any]) -> None:
    kubernetes_validate.validate(manifest, KUBERNETES, strict=True)


def test_the_validator_rejects_what_kubernetes_would() -> None:
    # A guard on the guard: a misspelt field fails the strict validation.
    worker = by_kind("Deployment", "memstream-worker")
    broken = {**worker, "spec": {**worker["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_workers_are_ready_by_their_heartbeat_and_scale_on_lag_up_to_the_partitions() -> None:
    worker = by_kind("Deployment", "memstream-worker")["spec"]["template"]["spec"]
    (container,) = worker["containers"]
    probe = container["readinessProbe"]["exec"]["command"]
    assert probe == ["memstream", "probe", "worker"]
    build_parser().parse_args(probe[1:])  # a command the image's CLI has
    settings = by_kind("ConfigMap", "memstream")["data"]
    assert settings["MEMSTREAM_WORKER_METRICS_HOST"] == "0.0.0.0"
    assert {"name": "metrics", "containerPort": int(settings["MEMSTREAM_WORKER_METRICS_PORT"])} in (
        container["ports"]
    )

    autoscaler = by_kind("HorizontalPodAutoscaler", "memstream-worker")["spec"]
    assert autoscaler["scaleTargetRef"]["name"] == "memstream-worker"
    assert autoscaler["maxReplicas"] == int(settings["MEMSTREAM_PARTITIONS"])
    (metric,) = autoscaler["metrics"]
    metrics = Metrics()
    metrics.worker.set_consumer_lag({("memstream.memory", 0): 3})
    assert f"{metric['pods']['metric']['name']}{{" in metrics.exposition().decode()


def test_every_variable_the_manifests_set_is_a_setting() -> None:
    known = {f.metadata["env"] for f in dataclasses.fields(Settings)}
    for kind in ("ConfigMap", "Secret"):
        manifest = by_kind(kind, "memstream")
        names = set(manifest.get("data", manifest.get("stringData", {})))
        assert names <= known, names - known


# What only the local stack (`memstream up`) reads: compose publishes ports with them instead.
LOCAL_ONLY = {
    "MEMSTREAM_KAFKA_PORT",
    "MEMSTREAM_KAFKA_CONTROLLER_PORT",
    "MEMSTREAM_REDIS_PORT",
    "MEMSTREAM_SERVER_PORT",
    "MEMSTREAM_STATE_DIR",
}


def test_compose_passes_every_setting_to_the_workers_and_the_server() -> None:
    compose = yaml.safe_load((ROOT / "infra" / "compose.yaml").read_text(encoding="utf-8"))
    known = {f.metadata["env"] for f in dataclasses.fields(Settings)}
    for service in ("worker", "server", "cli"):
        passed = set(compose["services"][service]["environment"])
        assert passed == known - LOCAL_ONLY, (known - LOCAL_ONLY) ^ passed


def test_the_plugin_example_in_the_docs_is_the_tested_suite() -> None:
    example = ROOT / "tests" / "containers" / "example_suite" / "test_agent_memory.py"
    docs = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    assert f"```python\n{example.read_text(encoding='utf-8')}```" in docs
