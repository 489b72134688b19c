"""`memstream dead-letters list|retry`: what the projector refused, and re-driving it.

`list` shows the pending letters (or all, with --all): when each was dead-lettered, its code
and reason, its tenant and where the message sat in the log; never the message itself, which
may be sealed content. `retry` re-drives the pending ones (those of --code and --tenant) once
the cause is fixed, and says what became of each (streams.dead_letters).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from memstream.deployment import Deployment
from memstream.memory.tenancy import validate_tenant
from memstream.operations import dead_letter_retry
from memstream.streams.dead_letters import DeadLetter, Outcome, read_dead_letters

__all__ = ["pending_by_code", "pending_line", "register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    letters = commands.add_parser(
        "dead-letters", help="list the messages the projector refused, or retry them"
    )
    actions = letters.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the pending dead letters (--all: every one)")
    retry = actions.add_parser("retry", help="project the pending dead letters again")
    for parser in (listing, retry):
        parser.add_argument("--code", help="only letters of this error code")
        parser.add_argument("--tenant", type=validate_tenant, help="only this tenant's letters")
    listing.add_argument("--all", action="store_true", help="resolved letters too")
    listing.add_argument("--json", action="store_true", help="one JSON object a line")
    listing.set_defaults(run=_list)
    retry.set_defaults(run=_retry)


def _row(letter: DeadLetter, resolved: str | None) -> dict[str, Any]:
    return {
        "offset": letter.offset,
        "at": letter.at.isoformat(),
        "code": letter.code,
        "tenant": letter.tenant,
        "source": letter.source,
        "reason": letter.reason,
        "resolved": resolved,
    }


def _list(args: argparse.Namespace, deployment: Deployment) -> int:
    log = asyncio.run(read_dead_letters(deployment.kafka, deployment.topics))
    pending = log.pending(code=args.code, tenant=args.tenant)
    shown = log.matching(code=args.code, tenant=args.tenant, resolved=args.all)
    for letter in shown:
        row = _row(letter, log.resolved.get(letter.offset))
        if args.json:
            print(json.dumps(row, ensure_ascii=False))
        else:
            state = f"resolved: {row['resolved']}" if row["resolved"] else "pending"
            print(
                f"#{row['offset']} {row['at']} {row['code']} tenant={row['tenant']!r} "
                f"source={row['source']} ({state})\n    {row['reason']}"
            )
    if not args.json:
        print(f"{len(pending)} pending of {len(log.letters)} dead letters")
    return 0


def _retry(args: argparse.Namespace, deployment: Deployment) -> int:
    async def run() -> list[Outcome]:
        log = await read_dead_letters(deployment.kafka, deployment.topics)
        letters = log.pending(code=args.code, tenant=args.tenant)
        if not letters:
            return []
        async with dead_letter_retry(deployment) as retry:
            return [retried.outcome for retried in await retry.retry(letters)]

    outcomes = Counter(asyncio.run(run()))
    told = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
    print(f"retried {outcomes.total()} dead letters{': ' + told if told else ''}")
    if outcomes[Outcome.FAILED]:
        print(
            f"{outcomes[Outcome.FAILED]} failed again and are dead letters anew with their "
            "reason: `memstream dead-letters list`"
        )
        return 1
    return 0


def pending_by_code(deployment: Deployment) -> dict[str, int]:
    """The pending dead letters' count by code (`status`, `stats`)."""
    return asyncio.run(read_dead_letters(deployment.kafka, deployment.topics)).pending_by_code()


def pending_line(by_code: Mapping[str, int]) -> str:
    """What `status` and `stats` say of the pending dead letters, so none piles up unseen."""
    if not by_code:
        return "dead letters pending: none"
    counts = ", ".join(f"{n} {code}" for code, n in by_code.items())
    return (
        f"dead letters pending: {sum(by_code.values())} ({counts}); see `memstream "
        "dead-letters list`, and `memstream dead-letters retry` once the cause is fixed"
    )
