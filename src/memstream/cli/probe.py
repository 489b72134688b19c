"""`memstream probe worker|server|stack`: exit 0 when the thing named is up, 1 saying why not.

For containers (docs/deploy.md, infra/compose.yaml). `worker` and `server`: a process of that
kind on this host beats (the heartbeat a worker or server keeps in Redis, health.Heartbeat,
is written only while it runs and reaches Redis, and names the host, which in a container or
a pod is its own name): a readiness probe. `stack`: the Kafka and Redis of the settings
answer, which a container waits for before it starts a worker or server, so that start order
does not rest on an engine's restart policy.
"""

from __future__ import annotations

import argparse
import socket
import sys

from memstream.cli.stack import broker_answers
from memstream.deployment import Deployment
from memstream.errors import MemstreamError

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    probe = commands.add_parser(
        "probe",
        help="exit 0 if this host's worker (or server) beats, or if Kafka and Redis answer",
    )
    probe.add_argument("what", choices=["worker", "server", "stack"])
    probe.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    problem = (
        _stack_problem(deployment) if args.what == "stack" else _beat_problem(deployment, args.what)
    )
    if problem:
        print(f"memstream probe: {problem}", file=sys.stderr)
        return 1
    return 0


def _stack_problem(deployment: Deployment) -> str | None:
    settings = deployment.settings
    try:
        deployment.status().live_generation()
    except MemstreamError as exc:
        return f"Redis at {settings.redis} does not answer ({exc})"
    if not broker_answers(deployment.kafka):
        return f"Kafka at {settings.bootstrap_servers} does not answer"
    return None


def _beat_problem(deployment: Deployment, kind: str) -> str | None:
    host = socket.gethostname()
    reports = deployment.projection.processes().reports()
    if any(r.kind == kind and r.host == host for r in reports):
        return None
    seen = ", ".join(f"{r.kind}@{r.host}" for r in reports) or "none"
    return (
        f"no {kind} heartbeat from {host} in namespace {deployment.settings.namespace} "
        f"(heartbeats: {seen})"
    )
