"""`memstream history` and `memstream diff`: a memory's changes, and what changed between two
moments, read from the tenant's partition of the log (streams.lineage, docs/lineage.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from memstream.cli.forget import instant
from memstream.deployment import Deployment
from memstream.memory.history import Diffed, Touch
from memstream.memory.provenance import provenance_json

__all__ = ["diffed_as_json", "register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = commands.add_parser(
        "history", help="every event of the log that touched one memory, oldest first"
    )
    history.add_argument("--tenant", required=True)
    history.add_argument("--json", action="store_true", help="print a JSON array")
    history.add_argument("memory_id")
    history.set_defaults(run=_history)

    diff = commands.add_parser(
        "diff", help="what was added, changed, consolidated, evicted, forgotten between two times"
    )
    diff.add_argument("--tenant", required=True)
    diff.add_argument("--from", dest="start", type=instant, required=True, help="ISO-8601 time")
    diff.add_argument("--to", dest="end", type=instant, required=True, help="ISO-8601 time")
    diff.add_argument("--json", action="store_true", help="print a JSON array")
    diff.set_defaults(run=_diff)


def diffed_as_json(diffed: Diffed) -> dict[str, Any]:
    memory = diffed.memory
    return {
        "memory_id": diffed.memory_id,
        "change": diffed.change,
        "content": memory.content if memory is not None else None,
        "provenance": provenance_json(memory.provenance) if memory is not None else None,
        "by": diffed.last.as_json(),
    }


def _related(touch: Touch) -> str:
    if not touch.related:
        return ""
    label = "into" if touch.change.value == "consolidated" else "replacing"
    return f" {label} {', '.join(touch.related)}"


def _history(args: argparse.Namespace, deployment: Deployment) -> int:
    touches = deployment.lineage().history(args.tenant, args.memory_id)
    if args.json:
        print(json.dumps([t.as_json() for t in touches], ensure_ascii=False, indent=2))
        return 0
    for t in touches:
        where = f"{t.position.topic}/{t.position.partition}@{t.position.offset}"
        print(
            f"{t.written_at.isoformat()}  {t.change.value:<12} by {t.event_type} "
            f"v{t.event_version} {t.event_id} at {where}{_related(t)}"
        )
    return 0


def _diff(args: argparse.Namespace, deployment: Deployment) -> int:
    found = deployment.lineage().diff(args.tenant, args.start, args.end)
    if args.json:
        print(json.dumps([diffed_as_json(d) for d in found], ensure_ascii=False, indent=2))
        return 0
    if not found:
        print(f"(nothing changed in tenant {args.tenant!r}'s memory between those times)")
    for d in found:
        text = f"  {d.memory.content}" if d.memory is not None else ""
        by = f"{d.last.event_type} at {d.last.written_at.isoformat()}"
        print(f"{d.change:<12} {d.memory_id}  ({by}){text}")
    return 0
