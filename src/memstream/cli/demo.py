"""`memstream demo`: import a small sample for two tenants and show that each recalls only its own.

Needs the stack and a worker (`make demo` starts both).
"""

from __future__ import annotations

import argparse
from importlib.resources import as_file, files

from memstream.cli import wiring
from memstream.cli.importer import import_file
from memstream.config import Settings

__all__ = ["register"]

QUESTIONS = (
    "Which database do we use, and when do we deploy?",
    "What caused the last outage?",
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser("demo", help="import a sample for two tenants and recall")
    demo.set_defaults(run=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    with as_file(files("memstream.cli").joinpath("demo.jsonl")) as sample:
        events = import_file(settings, sample, wait_s=120.0)
    print(f"Imported {len(events)} events for tenants 'acme' and 'globex' (threads differ).\n")
    recaller = wiring.recaller(settings)
    for question in QUESTIONS:
        for tenant in ("acme", "globex"):
            print(f"[{tenant}] {question}")
            for hit in recaller.recall(tenant, question, k=3):
                memory = hit.memory
                print(f"   {hit.score:5.2f}  ({memory.thread}, {memory.role}) {memory.content}")
        print()
    return 0
