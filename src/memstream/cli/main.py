"""The `memstream` command: one subcommand per module, dispatched from here, and the commands
other distributions add through the `memstream.commands` entry points (memstream-bench's
`bench`)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points

from memstream import __version__
from memstream.cli import (
    acls,
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
    reextract,
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

__all__ = ["COMMANDS_GROUP", "build_parser", "main"]

# Each entry point names a command and a `register(commands)` like the modules' below.
COMMANDS_GROUP = "memstream.commands"

# The commands of memstream's own extras, and how to get each: `memstream X` says so when the
# distribution that adds it is missing, where argparse would only call X an invalid choice.
_EXTRAS = {"bench": "pip install 'memstream[bench]' (in a checkout: make install-dev)"}


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
        reextract,
        replay,
        reshard,
        verify,
        dead_letters,
        stats,
        tail,
        demo,
        schemas,
        serve,
        mcp,
        keys,
        acls,
        probe,
    ):
        module.register(commands)
    _register_plugins(commands)
    return parser


def _register_plugins(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    missing = dict.fromkeys(_EXTRAS, "is not installed")
    for entry in entry_points(group=COMMANDS_GROUP):
        try:
            register = entry.load()
            # Tried on a parser of its own first: a plugin that fails half-way (a bug, a
            # version that does not match) must not take memstream's own commands with it.
            register(argparse.ArgumentParser(add_help=False).add_subparsers())
        except Exception as exc:  # noqa: BLE001  # whatever it raised, the CLI goes on
            # Its metadata without its code (a half-removed install), or code that fails: say
            # so when it is run.
            missing[entry.name] = f"could not be loaded ({type(exc).__name__}: {exc})"
            continue
        register(commands)
        missing.pop(entry.name, None)
    for name, reason in missing.items():
        how = f": {_EXTRAS[name]}" if name in _EXTRAS else ""
        # Any arguments: the command's own are unknown here (main() lets them through).
        placeholder = commands.add_parser(name, add_help=False, help=f"not installed{how}")
        placeholder.set_defaults(missing=f"`memstream {name}` {reason}{how}")


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run the command `argv` names (default: sys.argv) with the settings `environ` (default:
    os.environ) gives; the exit status."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    missing = getattr(args, "missing", None)
    if missing is not None:
        print(f"memstream: {missing}", file=sys.stderr)
        return 2
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
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
