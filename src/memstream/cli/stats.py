"""`memstream stats`: memories per tenant (count, oldest, newest), the tokens model calls
spent on each tenant today (extraction, by strategy), the worker's lag, and each shard of the
projection (its memories, the memory its Redis uses, its partitions' lag, whether it answers).
A shard that does not answer is shown as such, and the command exits 1."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from memstream.cli.dead_letters import pending_by_code, pending_line
from memstream.deployment import Deployment
from memstream.memory.tenancy import validate_tenant
from memstream.operations import ShardState, projection_lag, shard_states

__all__ = ["register", "shard_line"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stats = commands.add_parser("stats", help="memories per tenant and the worker's lag")
    stats.add_argument("--tenant", type=validate_tenant)
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    shards = shard_states(deployment)
    down = [state for state in shards if not state.report.reachable]
    body: dict[str, Any] = {"shards": [_shard(state) for state in shards]}
    if not down:
        status = deployment.status()
        tenants = status.tenant_stats(args.tenant)
        lag = projection_lag(deployment)
        today = datetime.now(UTC).date()
        tokens: dict[str, dict[str, int]] = {}
        for (tenant, purpose), spent in deployment.token_ledger().spent(today, args.tenant).items():
            tokens.setdefault(tenant, {})[purpose] = spent
        body |= {
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
                    "tokens_today": tokens.get(t.tenant, {}),
                }
                for t in tenants
            },
        }
    if args.tenant is not None:
        body["tenant"] = args.tenant
    if args.json:
        print(json.dumps(body, ensure_ascii=False, indent=2))
        return 1 if down else 0
    if not down:
        print(f"generation {body['generation']}: {body['memories']} memories, lag {body['lag']}")
        print(pending_line(body["dead_letters_pending"]))
    if len(shards) > 1 or down:
        for state in shards:
            print(shard_line(state))
    if down:
        print(
            f"{len(down)} of {len(shards)} shards do not answer: their tenants' recall is "
            "skipped and their events wait in the log; start them again (each heals from the "
            "log) or check MEMSTREAM_REDIS_SHARDS",
            file=sys.stderr,
        )
        return 1
    for tenant, row in body["tenants"].items():
        print(f"  {tenant!r}: {row['memories']} memories, {row['oldest']} .. {row['newest']}")
        for purpose, spent in sorted(row["tokens_today"].items()):
            print(f"    {purpose}: {spent} tokens today (UTC)")
    return 0


def _shard(state: ShardState) -> dict[str, Any]:
    report = state.report
    return {
        "shard": report.shard,
        "redis": report.where,
        "reachable": report.reachable,
        "error": report.error or None,
        "generation": report.generation if report.reachable else None,
        "memories": report.memories if report.reachable else None,
        "memory_used_bytes": report.used_bytes if report.reachable else None,
        "partitions": list(state.partitions),
        "lag": state.lag,
    }


def shard_line(state: ShardState) -> str:
    """One shard as `stats` and `status` print it."""
    report = state.report
    where = f"shard {report.shard} ({report.where}, partitions {list(state.partitions)})"
    if not report.reachable:
        return f"{where}: NOT REACHABLE: {report.error}"
    return (
        f"{where}: generation {report.generation}, {report.memories} memories, "
        f"{report.used_bytes / 2**20:.1f} MiB used, lag {state.lag}"
    )
