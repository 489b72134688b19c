"""`memstream verify [--tenant T]`: rebuild the projection aside and compare it with the live one.

The rebuild reads the log up to its end into a scratch generation that is never swapped in;
verify then waits (within --timeout) for the live projection to have applied every event the
rebuild applied, compares them tenant by tenant (see projections.compare), prints every
difference and drops the scratch generation. Exit status 1 when anything differs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from memstream.cli import wiring
from memstream.cli.replay import progress_bar, report
from memstream.config import Settings
from memstream.errors import MemstreamError
from memstream.memory.tenancy import validate_tenant
from memstream.projections.compare import Difference, ProjectionComparer
from memstream.projections.generations import Generations
from memstream.projections.schema import Keyspace
from memstream.streams.replay import Rebuilt

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = commands.add_parser("verify", help="compare a rebuild from the log with the live")
    verify.add_argument("--tenant", type=validate_tenant, help="verify this tenant only")
    verify.add_argument("--timeout", type=float, default=60.0, help="wait for the live worker")
    verify.set_defaults(run=_run)


async def _verify(settings: Settings, args: argparse.Namespace) -> list[Difference]:
    keys = Keyspace(settings.namespace)
    client = wiring.async_redis(settings)
    generations = Generations(client, keys, url=settings.redis)
    comparer = ProjectionComparer(client, url=settings.redis)
    async with wiring.replayer(settings) as replayer:
        rebuilt = await replayer.rebuild(args.tenant, swap=False, progress=progress_bar)
    print(f"\nverify: {report(rebuilt)}", file=sys.stderr)
    try:
        live = keys.at(await _wait_live(settings, rebuilt, args.timeout))
        scratch = keys.at(rebuilt.generation)
        tenants = (
            {args.tenant}
            if args.tenant is not None
            else await comparer.tenants(live) | await comparer.tenants(scratch)
        )
        differences = []
        for tenant in sorted(tenants):
            differences += await comparer.compare(live, scratch, tenant)
        return differences
    finally:
        await generations.drop(rebuilt.generation)
        await client.aclose()


async def _wait_live(settings: Settings, rebuilt: Rebuilt, wait_s: float) -> int:
    """The live generation, once it has applied every event the rebuild applied."""
    status = wiring.projection_status(settings)
    deadline = time.monotonic() + wait_s
    while True:
        positions = await asyncio.to_thread(status.positions)
        behind = {f: o for f, o in rebuilt.last_events.items() if positions.get(f, -1) < o}
        if not behind:
            return (await asyncio.to_thread(status.live)).generation
        if time.monotonic() > deadline:
            raise MemstreamError(
                f"the live projection has not caught up with the log within {wait_s:.0f}s "
                f"(behind on {', '.join(sorted(behind))}); is a worker running? Nothing was "
                "compared."
            )
        await asyncio.sleep(0.1)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    differences = asyncio.run(_verify(settings, args))
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
    print("verify: the live projection equals the rebuild from the log", file=sys.stderr)
    return 0
