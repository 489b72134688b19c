"""`memstream recall`: what a tenant's memory returns (or returned, `--as-of`) for a query,
best first."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from memstream.cli.forget import instant
from memstream.deployment import Deployment
from memstream.memory.model import RecalledMemory
from memstream.memory.provenance import provenance_json

__all__ = ["hit_as_json", "register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    recall = commands.add_parser("recall", help="recall a tenant's memories for a query")
    recall.add_argument("--tenant", required=True)
    recall.add_argument("--k", type=int, default=5, help="how many memories (default 5)")
    recall.add_argument("--json", action="store_true", help="print a JSON array")
    recall.add_argument(
        "--as-of",
        type=instant,
        help="answer from the memory as it stood at this ISO-8601 time (docs/lineage.md)",
    )
    recall.add_argument(
        "--valid-at",
        type=instant,
        help="rank facts by what held at this ISO-8601 time: a fact a later one superseded by "
        "then ranks lower (default: now, or the --as-of time; docs/memory.md, Supersession)",
    )
    recall.add_argument("query")
    recall.set_defaults(run=_run)


def hit_as_json(hit: RecalledMemory) -> dict[str, Any]:
    memory = hit.memory
    return {
        "id": memory.id,
        "content": memory.content,
        "score": round(hit.score, 6),
        "memory_type": memory.memory_type.value,
        "tenant": memory.tenant,
        "thread": memory.thread,
        "role": memory.role,
        "timestamp": memory.timestamp.isoformat(),
        "importance": memory.importance,
        "metadata": dict(memory.metadata),
        "provenance": provenance_json(memory.provenance),
        "valid_to": hit.valid_to.isoformat() if hit.valid_to else None,
    }


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    if args.as_of is not None or args.valid_at is not None:
        at = args.as_of or datetime.now(UTC)
        hits = deployment.lineage().recall(
            args.tenant, args.query, at=at, k=args.k, valid_at=args.valid_at
        )
    else:
        hits = deployment.recaller().recall(args.tenant, args.query, k=args.k)
    if args.json:
        print(json.dumps([hit_as_json(hit) for hit in hits], ensure_ascii=False, indent=2))
        return 0
    if not hits:
        print(f"(nothing recalled for tenant {args.tenant!r})")
    for hit in hits:
        memory = hit.memory
        who = f"{memory.role}: " if memory.role else ""
        until = f" (until {hit.valid_to:%Y-%m-%d})" if hit.valid_to else ""
        print(f"{hit.score:6.3f}  [{memory.thread}] {who}{memory.content}{until}")
    return 0
