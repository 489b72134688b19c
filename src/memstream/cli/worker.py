"""`memstream worker`: run a projection worker in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse

from memstream.config import Settings
from memstream.providers import embedder_from_settings
from memstream.streams.worker import run_worker

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser("worker", help="project the memory topic into Redis")
    worker.add_argument("--loglevel", default="info", choices=["debug", "info", "warning"])
    worker.set_defaults(run=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    run_worker(settings, embedder_from_settings(settings), loglevel=args.loglevel)
    return 0
