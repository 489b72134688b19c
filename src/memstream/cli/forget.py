"""`memstream forget`: forget a tenant's memories by id, by thread and/or time, or all of them.

The request goes into the log as one MemoryForgotten event (its id decided once here), so it
is applied once, survives rebuilds, and tombstones what it forgets: no later event brings a
forgotten memory back. `--wait` returns once the live projection has applied it.

`--erase` crypto-shreds the whole tenant (docs/erasure.md): its data keys are destroyed, so
its content in the log can never be read again, a TenantErased event deletes its memories,
and Redis's files are rewritten; it waits for all of that.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime

from memstream.cli.importer import wait_applied
from memstream.deployment import Deployment
from memstream.errors import InvalidInputError
from memstream.memory.events import MemoryForgotten
from memstream.memory.moments import parse_moment
from memstream.operations import erase_tenant

__all__ = ["instant", "register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    forget = commands.add_parser("forget", help="forget a tenant's memories (right to erasure)")
    forget.add_argument("--tenant", required=True)
    forget.add_argument("--id", dest="ids", nargs="+", default=[], metavar="ID")
    forget.add_argument("--thread", help="the memories of this thread")
    forget.add_argument("--before", type=instant, help="memories recorded before (ISO-8601)")
    forget.add_argument("--all", action="store_true", help="every memory of the tenant")
    forget.add_argument(
        "--erase",
        action="store_true",
        help="erase the whole tenant, log included: destroy its data keys (docs/erasure.md)",
    )
    forget.add_argument("--wait", action="store_true", help="return once it is applied")
    forget.add_argument("--timeout", type=float, default=60.0, help="--wait's limit in seconds")
    forget.set_defaults(run=_run)


def instant(raw: str) -> datetime:
    try:
        return parse_moment(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


async def _publish(deployment: Deployment, args: argparse.Namespace) -> MemoryForgotten:
    await deployment.ensure_topics()
    async with deployment.event_publisher() as publisher:
        return await publisher.forget(
            args.tenant,
            memory_ids=args.ids,
            thread=args.thread,
            before=args.before,
            everything=args.all,
        )


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    if args.erase:
        return _erase(args, deployment)
    if args.all and (args.ids or args.thread or args.before):
        raise InvalidInputError("--all forgets everything; leave out --id, --thread and --before")
    event = asyncio.run(_publish(deployment, args))
    if args.wait:
        wait_applied(deployment, [event], args.timeout)
    done = "applied" if args.wait else "in the log"
    print(f"forget request {event.id} for tenant {args.tenant!r}: {done}", file=sys.stderr)
    return 0


def say(line: str) -> None:
    print(line, file=sys.stderr)


def _erase(args: argparse.Namespace, deployment: Deployment) -> int:
    if args.ids or args.thread or args.before or args.all:
        raise InvalidInputError(
            "--erase erases the whole tenant; leave out --id, --thread, --before and --all"
        )
    erasure = erase_tenant(deployment, args.tenant, timeout_s=args.timeout)
    say(f"tenant {args.tenant!r} erased (event {erasure.event.id}):")
    say(f"  data keys destroyed: {len(erasure.destroyed)} ({deployment.topics.keys})")
    say("  projection: every memory of the tenant deleted")
    say(f"  Redis files rewritten: {', '.join(erasure.rewritten) or 'none (no persistence)'}")
    if not erasure.sealed:
        say(
            "  WARNING: no master key is configured, so nothing of this tenant was ever sealed: "
            "its events in the log stay readable (docs/erasure.md, Limits)"
        )
    say(
        "  the wrapped keys leave the broker's disks when the keys topic is compacted "
        "(docs/erasure.md: segment.ms, max.compaction.lag.ms)"
    )
    return 0
