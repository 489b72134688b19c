"""`memstream stats`: memories per tenant (count, oldest, newest) and the worker's lag."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from memstream.deployment import Deployment
from memstream.memory.tenancy import validate_tenant
from memstream.streams.topics import end_offsets

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stats = commands.add_parser("stats", help="memories per tenant and the worker's lag")
    stats.add_argument("--tenant", type=validate_tenant)
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(run=_run)


def _lag(deployment: Deployment, positions: dict[str, int]) -> dict[int, int]:
    """Per partition: messages in the log the live projection has not taken in yet."""
    topic = deployment.topics.memory
    ends = asyncio.run(end_offsets(deployment.kafka, topic))
    return {p: max(end - positions.get(f"{topic}/{p}", -1) - 1, 0) for p, end in ends.items()}


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    status = deployment.status()
    tenants = status.tenant_stats(args.tenant)
    lag = _lag(deployment, status.positions())
    body: dict[str, Any] = {
        "memories": sum(t.memories for t in tenants),
        "lag": sum(lag.values()),
        "lag_by_partition": {str(p): n for p, n in sorted(lag.items())},
        "generation": status.live().generation,
        "tenants": {
            t.tenant: {
                "memories": t.memories,
                "oldest": t.oldest.isoformat(),
                "newest": t.newest.isoformat(),
            }
            for t in tenants
        },
    }
    if args.tenant is not None:
        body["tenant"] = args.tenant
    if args.json:
        print(json.dumps(body, ensure_ascii=False, indent=2))
        return 0
    print(f"generation {body['generation']}: {body['memories']} memories, lag {body['lag']}")
    for tenant, row in body["tenants"].items():
        print(f"  {tenant!r}: {row['memories']} memories, {row['oldest']} .. {row['newest']}")
    return 0
