"""`memstream replay [--tenant T] [--shard N]`: rebuild the projection from the log and swap
it in.

Runs beside the live worker: recall keeps answering from the live generation until the
rebuilt one has caught up and is swapped in (see streams.replay). With the projection sharded
(docs/scaling.md) each shard is rebuilt from its own partitions and swaps its own generation:
`--shard N` rebuilds one while the others serve untouched, a tenant's rebuild runs on its
shard, and without either every shard is rebuilt at the same time. Progress (events/s, time
left) goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from memstream.deployment import Deployment
from memstream.errors import InvalidInputError
from memstream.memory.tenancy import validate_tenant
from memstream.streams.replay import Progress, Rebuilt

__all__ = ["add_allow_dead_letters", "add_shard", "chosen_shards", "progress_bar", "register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = commands.add_parser("replay", help="rebuild the projection from the log, swap it in")
    replay.add_argument("--tenant", type=validate_tenant, help="rebuild this tenant only")
    add_shard(replay, "rebuild this shard only (default: every shard, at the same time)")
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


def add_shard(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--shard", type=int, metavar="N", help=help)


def chosen_shards(args: argparse.Namespace, deployment: Deployment) -> list[int]:
    """The shards a command works on: `--shard`, else the tenant's, else all of them. A
    shard the layout does not have is a usage error naming the ones it has."""
    count = deployment.projection.current_layout().count
    if args.shard is not None:
        if not 0 <= args.shard < count:
            raise InvalidInputError(
                f"--shard {args.shard}: the projection has {count} shard(s), numbered 0.."
                f"{count - 1} (MEMSTREAM_REDIS_SHARDS)"
            )
        if args.tenant is not None and deployment.projection.shard_of(args.tenant) != args.shard:
            raise InvalidInputError(
                f"tenant {args.tenant!r} lives on shard "
                f"{deployment.projection.shard_of(args.tenant)}, not {args.shard}; drop --shard"
            )
        return [args.shard]
    if args.tenant is not None:
        return [deployment.projection.shard_of(args.tenant)]
    return list(range(count))


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
    shards = chosen_shards(args, deployment)

    async def rebuild(shard: int) -> Rebuilt:
        async with deployment.replayer(shard) as replayer:
            return await replayer.rebuild(
                args.tenant,
                swap=True,
                reembed=args.reembed,
                allow_dead_letters=args.allow_dead_letters,
                # Several shards at once would draw over each other's bar.
                progress=progress_bar if len(shards) == 1 else lambda _: None,
            )

    async def rebuild_all() -> list[Rebuilt]:
        return list(await asyncio.gather(*(rebuild(shard) for shard in shards)))

    rebuilt = asyncio.run(rebuild_all())
    print(file=sys.stderr)
    sharded = deployment.projection.current_layout().count > 1
    for shard, done in zip(shards, rebuilt, strict=True):
        what = (
            f"tenant {args.tenant!r} of generation {done.live}"
            if args.tenant
            else (f"generation {done.generation} (was {done.live})")
        )
        where = f"shard {shard}: " if sharded else ""
        print(f"replay: {where}{report(done)}; swapped in {what}", file=sys.stderr)
    return 0
