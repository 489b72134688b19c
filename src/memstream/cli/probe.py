"""`memstream probe worker|server`: exit 0 when a process of that kind on this host beats.

For a container's readiness probe (docs/deploy.md, infra/compose.yaml): the heartbeat a worker
or server keeps in Redis (health.Heartbeat) is written only while it runs and reaches Redis,
and names the host, which in a container or a pod is its own name. Anything else exits 1,
saying what was found instead.
"""

from __future__ import annotations

import argparse
import socket
import sys

from memstream.deployment import Deployment

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    probe = commands.add_parser(
        "probe", help="exit 0 if this host's worker (or server) has a fresh heartbeat"
    )
    probe.add_argument("kind", choices=["worker", "server"])
    probe.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    host = socket.gethostname()
    reports = deployment.processes()
    if any(r.kind == args.kind and r.host == host for r in reports):
        return 0
    seen = ", ".join(f"{r.kind}@{r.host}" for r in reports) or "none"
    print(
        f"memstream probe: no {args.kind} heartbeat from {host} in namespace "
        f"{deployment.settings.namespace} (heartbeats: {seen})",
        file=sys.stderr,
    )
    return 1
