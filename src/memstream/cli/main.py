"""The `memstream` command: one subcommand per module, dispatched from here."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence

from memstream import __version__
from memstream.cli import (
    acls,
    bench,
    chat,
    dead_letters,
    demo,
    erasure,
    explain,
    forget,
    importer,
    keys,
    lineage,
    mcp,
    probe,
    recall,
    replay,
    reshard,
    schemas,
    serve,
    stack,
    stats,
    tail,
    verify,
    worker,
)
from memstream.deployment import Deployment
from memstream.errors import MemstreamError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memstream",
        description="Event-sourced long-term memory for LLM agents (Kafka + Faust + Redis).",
        epilog="Configuration comes from MEMSTREAM_* environment variables; see README.md.",
    )
    parser.add_argument("--version", action="version", version=f"memstream {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        stack,
        worker,
        importer,
        recall,
        explain,
        lineage,
        chat,
        forget,
        erasure,
        replay,
        reshard,
        verify,
        dead_letters,
        stats,
        tail,
        demo,
        bench,
        schemas,
        serve,
        mcp,
        keys,
        acls,
        probe,
    ):
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run the command `argv` names (default: sys.argv) with the settings `environ` (default:
    os.environ) gives; the exit status."""
    args = build_parser().parse_args(argv)
    if args.command != "worker":
        # The drivers log each failed connection attempt; the command's own error says it once.
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        with Deployment.from_env(environ) as deployment:
            return int(args.run(args, deployment) or 0)
    except MemstreamError as exc:
        print(f"memstream: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
