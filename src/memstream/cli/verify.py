"""`memstream verify [--tenant T] [--shard N]`: rebuild the projection aside and compare it with
the live one (each shard against its own rebuild; `--shard N` checks one while the others
serve).

The rebuild reads the log up to its end into a scratch generation that is never swapped in;
verify then waits (within --timeout) for the live projection to have applied every event the
rebuild applied, compares them tenant by tenant (see projections.compare), prints every
difference and drops the scratch generation. Exit status 1 when anything differs, or when
the log holds messages the rebuild cannot read (unless --allow-dead-letters). A tenant
whose partition took new events after the rebuild read the log's end (live traffic) is not
compared, and is named as such.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass

from memstream.cli.replay import (
    add_allow_dead_letters,
    add_shard,
    chosen_shards,
    progress_bar,
    report,
)
from memstream.deployment import Deployment
from memstream.errors import MemstreamError
from memstream.memory.ports import Difference, Generations
from memstream.memory.tenancy import validate_tenant
from memstream.streams.replay import Rebuilt
from memstream.streams.topics import topic_partitions
from memstream.streams.wire import partition_of

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = commands.add_parser("verify", help="compare a rebuild from the log with the live")
    verify.add_argument("--tenant", type=validate_tenant, help="verify this tenant only")
    add_shard(verify, "verify this shard only (default: every shard, one after the other)")
    verify.add_argument("--timeout", type=float, default=60.0, help="wait for the live worker")
    add_allow_dead_letters(verify)
    verify.set_defaults(run=_run)


async def _verify(
    deployment: Deployment, args: argparse.Namespace, shard: int
) -> tuple[list[Difference], list[str]]:
    """Shard `shard`'s differences, and its tenants that could not be compared."""
    async with deployment.projection.session(shard) as session:
        comparer = session.comparer
        async with deployment.replayer(shard) as replayer:
            rebuilt = await replayer.rebuild(
                args.tenant,
                swap=False,
                allow_dead_letters=args.allow_dead_letters,
                progress=progress_bar,
            )
        print(f"\nverify: {report(rebuilt)}", file=sys.stderr)
        try:
            live = await _wait_live(deployment, session.generations, rebuilt, args.timeout)
            scratch = rebuilt.generation
            tenants = (
                {args.tenant}
                if args.tenant is not None
                else await comparer.tenants(live) | await comparer.tenants(scratch)
            )
            moved = await _moved_partitions(deployment, rebuilt)
            differences, skipped = [], []
            for tenant in sorted(tenants):
                if partition_of(tenant, moved.partitions) in moved.fields:
                    skipped.append(tenant)
                    continue
                differences += await comparer.compare(live, scratch, validate_tenant(tenant))
            return differences, skipped
        finally:
            await session.generations.drop(rebuilt.generation)


async def _wait_live(
    deployment: Deployment, generations: Generations, rebuilt: Rebuilt, wait_s: float
) -> int:
    """The live generation, once it has applied every event the rebuild applied."""
    status = deployment.status()
    deadline = time.monotonic() + wait_s
    while True:
        positions = await asyncio.to_thread(status.positions)
        behind = {f: o for f, o in rebuilt.last_events.items() if positions.get(f, -1) < o}
        if not behind:
            return await generations.live()
        if time.monotonic() > deadline:
            raise MemstreamError(
                f"the live projection has not caught up with the log within {wait_s:.0f}s "
                f"(behind on {', '.join(sorted(behind))}); is a worker running? Nothing was "
                "compared."
            )
        await asyncio.sleep(0.1)


@dataclass(frozen=True, slots=True)
class _Moved:
    """Partitions the live projection took events on after the rebuild read its log end."""

    fields: frozenset[int]
    partitions: int


async def _moved_partitions(deployment: Deployment, rebuilt: Rebuilt) -> _Moved:
    # A tenant whose partition moved on may differ only because live traffic arrived while
    # verify ran: comparing it would report drift that is not there.
    topic = deployment.topics.memory
    partitions = await topic_partitions(deployment.kafka, topic)
    positions = await asyncio.to_thread(deployment.status().positions)
    moved = {
        tp.partition
        for tp in partitions
        if positions.get(f"{topic}/{tp.partition}", -1)
        > rebuilt.read_to.get(f"{topic}/{tp.partition}", -1)
    }
    return _Moved(frozenset(moved), len(partitions))


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    differences: list[Difference] = []
    skipped: list[str] = []
    for shard in chosen_shards(args, deployment):
        found, missed = asyncio.run(_verify(deployment, args, shard))
        differences += found
        skipped += missed
    if skipped:
        named = ", ".join(map(repr, skipped[:10])) + (" ..." if len(skipped) > 10 else "")
        print(
            f"verify: {len(skipped)} tenants not compared, their partition took new events "
            f"while verify ran: {named}. Run verify again when the log is quiet, or with "
            "--tenant.",
            file=sys.stderr,
        )
    for difference in differences:
        print(difference)
    if differences:
        print(
            f"verify: {len(differences)} differences between the live projection and a rebuild "
            "from the log (listed above). `memstream replay` replaces the live projection with "
            "a rebuild; please report the differences: the projection should never drift.",
            file=sys.stderr,
        )
        return 1
    compared = "the tenants compared equal" if skipped else "the live projection equals"
    print(f"verify: {compared} the rebuild from the log", file=sys.stderr)
    return 0
