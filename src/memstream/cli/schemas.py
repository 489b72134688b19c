"""`memstream schemas DIR`: write the JSON Schema of every memory event type into DIR."""

from __future__ import annotations

import argparse
from pathlib import Path

from memstream.deployment import Deployment
from memstream.memory.schemas import schema_files

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    schemas = commands.add_parser(
        "schemas", help="write the JSON Schemas of the memory events (for other producers)"
    )
    schemas.add_argument("dir", type=Path, help="folder to write <Type>.v<N>.schema.json into")
    schemas.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    args.dir.mkdir(parents=True, exist_ok=True)
    for name, text in schema_files().items():
        (args.dir / name).write_text(text, encoding="utf-8")
        print(args.dir / name)
    return 0
