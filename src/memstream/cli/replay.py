"""`memstream replay [--tenant T]`: rebuild the projection from the log and swap it in.

Runs beside the live worker: recall keeps answering from the live generation until the
rebuilt one has caught up and is swapped in (see streams.replay). Progress (events/s, time
left) goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from memstream.deployment import Deployment
from memstream.memory.tenancy import validate_tenant
from memstream.streams.replay import Progress, Rebuilt

__all__ = ["add_allow_dead_letters", "progress_bar", "register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = commands.add_parser("replay", help="rebuild the projection from the log, swap it in")
    replay.add_argument("--tenant", type=validate_tenant, help="rebuild this tenant only")
    replay.add_argument(
        "--reembed", action="store_true", help="embed everything again (default: reuse vectors)"
    )
    add_allow_dead_letters(replay)
    replay.set_defaults(run=_run)


def add_allow_dead_letters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-dead-letters",
        action="store_true",
        help="go on when some messages of the log cannot be read (default: exit 1, no swap)",
    )


def progress_bar(progress: Progress) -> None:
    width = 30
    share = progress.done / progress.total if progress.total else 1.0
    filled = int(width * min(share, 1.0))
    left = progress.remaining_s
    eta = f"{left:5.0f}s left" if left is not None else "    ? left"
    print(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {progress.done}/{progress.total} "
        f"events  {progress.rate:7.0f} ev/s  {eta}",
        end="",
        file=sys.stderr,
        flush=True,
    )


def report(rebuilt: Rebuilt) -> str:
    rate = rebuilt.messages / rebuilt.elapsed_s if rebuilt.elapsed_s > 0 else 0.0
    unread = ", ".join(f"{n} {reason}" for reason, n in sorted(rebuilt.dead_letters.items()))
    return (
        f"read {rebuilt.messages} events ({rebuilt.applied} applied"
        f"{' for tenant ' + repr(rebuilt.tenant) if rebuilt.tenant is not None else ''}"
        f"{f'; {rebuilt.erased} erased' if rebuilt.erased else ''}"
        f"{'; dead letters allowed: ' + unread if unread else ''}) in "
        f"{rebuilt.elapsed_s:.1f}s, {rate:.0f} events/s"
    )


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    async def rebuild() -> Rebuilt:
        async with deployment.replayer() as replayer:
            return await replayer.rebuild(
                args.tenant,
                swap=True,
                reembed=args.reembed,
                allow_dead_letters=args.allow_dead_letters,
                progress=progress_bar,
            )

    rebuilt = asyncio.run(rebuild())
    print(file=sys.stderr)
    what = (
        f"tenant {args.tenant!r} of generation {rebuilt.live}"
        if args.tenant
        else (f"generation {rebuilt.generation} (was {rebuilt.live})")
    )
    print(f"replay: {report(rebuilt)}; swapped in {what}", file=sys.stderr)
    return 0
