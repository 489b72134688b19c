"""`memstream stats`: memories per tenant (count, oldest, newest) and the worker's lag."""

from __future__ import annotations

import argparse
import json
from typing import Any

from memstream.cli.dead_letters import pending_by_code, pending_line
from memstream.deployment import Deployment
from memstream.memory.tenancy import validate_tenant
from memstream.operations import projection_lag

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stats = commands.add_parser("stats", help="memories per tenant and the worker's lag")
    stats.add_argument("--tenant", type=validate_tenant)
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    status = deployment.status()
    tenants = status.tenant_stats(args.tenant)
    lag = projection_lag(deployment)
    body: dict[str, Any] = {
        "memories": sum(t.memories for t in tenants),
        "lag": sum(lag.values()),
        "lag_by_partition": {str(p): n for p, n in sorted(lag.items())},
        "generation": status.live_generation(),
        "dead_letters_pending": pending_by_code(deployment),
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
    print(pending_line(body["dead_letters_pending"]))
    for tenant, row in body["tenants"].items():
        print(f"  {tenant!r}: {row['memories']} memories, {row['oldest']} .. {row['newest']}")
    return 0
