"""`memstream explain`: what the model was shown in a turn, each memory traced to the event
that wrote it (and, for a summary, to what it replaced), read from the log (docs/lineage.md).

A memory's text is printed only while the tenant still holds it: what was forgotten, evicted
or replaced since is named by id and provenance alone, never by content.
"""

from __future__ import annotations

import argparse
import json
import sys

from memstream.deployment import Deployment
from memstream.memory.model import Memory
from memstream.memory.provenance import Provenance, provenance_json
from memstream.memory.shown import ShownMemory, ShownTurn, turns_shown
from memstream.memory.tenancy import validate_tenant

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    explain = commands.add_parser(
        "explain", help="what a turn was shown, and where each memory came from"
    )
    explain.add_argument("--tenant", required=True)
    explain.add_argument("--run", dest="run_id", required=True, help="the run id of the turn")
    explain.add_argument("--turn", type=int, help="the turn's index in the run (default: all)")
    explain.add_argument("--json", action="store_true", help="print a JSON array")
    explain.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    tenant = validate_tenant(args.tenant)
    logged = deployment.lineage().log(tenant).events
    turns = turns_shown(logged, args.run_id, args.turn)
    if not turns:
        which = f"turn {args.turn} of run" if args.turn is not None else "run"
        print(
            f"explain: no recorded {which} {args.run_id!r} in tenant {tenant!r}'s log; check the "
            "run id (and --turn), or whether the turn was recorded yet",
            file=sys.stderr,
        )
        return 1
    ids = [s.memory_id for t in turns for s in t.shown]
    held = {m.id: m for m in deployment.reader().memories_by_id(tenant, ids) if m is not None}
    if args.json:
        print(json.dumps([_turn_json(t, held) for t in turns], ensure_ascii=False, indent=2))
        return 0
    for turn in turns:
        _print_turn(turn, held)
    return 0


def _turn_json(turn: ShownTurn, held: dict[str, Memory]) -> dict[str, object]:
    return {
        "turn": provenance_json(turn.provenance),
        "shown": [
            {
                "id": s.memory_id,
                "content": held[s.memory_id].content if s.memory_id in held else None,
                "held": s.memory_id in held,
                "provenance": provenance_json(s.provenance),
                "sources": [provenance_json(p) for p in s.sources],
            }
            for s in turn.shown
        ],
    }


def _print_turn(turn: ShownTurn, held: dict[str, Memory]) -> None:
    p = turn.provenance
    print(f"run {p.run} turn {p.turn} (thread {p.thread}, {p.recorded_at:%Y-%m-%d %H:%M:%S}Z, "
          f"{_at(p)}) was shown {len(turn.shown)} memories:")  # fmt: skip
    for index, shown in enumerate(turn.shown, 1):
        memory = held.get(shown.memory_id)
        text = memory.content if memory is not None else "(no longer held)"
        print(f"  {index}. [{shown.memory_id}] {text}")
        print(f"     {_origin(shown)}")
        how = "derived from" if shown.provenance and shown.provenance.derived else "replaced"
        for source in shown.sources:
            print(f"       {how} {_made(source)}")


def _origin(shown: ShownMemory) -> str:
    if shown.provenance is None:
        return "written by no readable event of the log"
    return _made(shown.provenance)


def _made(p: Provenance) -> str:
    by = f"{p.event_type} v{p.event_version} {p.event_id} at {_at(p)}"
    if p.turn is not None:
        return f"{by}: recorded by run {p.run} turn {p.turn} (thread {p.thread})"
    return f"{by} (thread {p.thread}, {p.recorded_at:%Y-%m-%d %H:%M:%S}Z)"


def _at(p: Provenance) -> str:
    return f"{p.topic}/{p.partition}@{p.offset}"
