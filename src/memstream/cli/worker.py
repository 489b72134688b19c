"""`memstream worker`: run a projection worker in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse

from memstream.deployment import Deployment
from memstream.operations import run_worker

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser("worker", help="project the memory topic into Redis")
    worker.add_argument("--loglevel", default="info", choices=["debug", "info", "warning"])
    worker.add_argument(
        "--metrics-port",
        type=int,
        help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics "
        "(default MEMSTREAM_WORKER_METRICS_PORT; 0: not served)",
    )
    worker.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    run_worker(deployment, loglevel=args.loglevel, metrics_port=args.metrics_port)
    return 0
