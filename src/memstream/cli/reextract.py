"""`memstream reextract`: derive a tenant's memories again with the configured chat model, a
strategy or a prompt (operations.reextract): each turn's new facts replace its earlier ones in
one step, and the tokens spent are reported."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict

from memstream.cli.forget import instant
from memstream.deployment import Deployment
from memstream.memory.extraction import Extracting, Strategy
from memstream.operations import Reextraction, reextract

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "reextract",
        help="extract a tenant's turns again with the configured chat model, on purpose",
    )
    command.add_argument("--tenant", required=True)
    command.add_argument(
        "--since", type=instant, help="only turns recorded at or after this ISO-8601 time"
    )
    command.add_argument(
        "--strategy",
        choices=[s.value for s in Strategy],
        help="how to extract (default: MEMSTREAM_EXTRACTION's, else discrete; custom takes "
        "MEMSTREAM_EXTRACTION_PROMPT)",
    )
    command.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the "
                         "projection to apply what was written (default 300)")  # fmt: skip
    command.add_argument("--json", action="store_true", help="print the report as JSON")
    command.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    settings = deployment.settings
    chosen = args.strategy or (settings.extraction if settings.extraction != "off" else "discrete")
    how = Extracting(Strategy(chosen), settings.extraction_prompt if chosen == "custom" else "")

    def progress(done: int, total: int) -> None:
        print(f"\rreextracted {done}/{total} turns", end="", file=sys.stderr, flush=True)

    done = asyncio.run(
        reextract(
            deployment, args.tenant, how, since=args.since, wait_s=args.timeout,
            progress=None if args.json else progress,
        )
    )  # fmt: skip
    if args.json:
        print(json.dumps(asdict(done), indent=2))
    else:
        print(("\n" if done.asked else "") + _report(args.tenant, how, done), file=sys.stderr)
    return 1 if done.stopped or done.failed else 0


def _report(tenant: str, how: Extracting, done: Reextraction) -> str:
    lines = [
        f"tenant {tenant!r}, {how.strategy} (prompt {how.prompt_version}): {done.asked} turns "
        f"asked again, {done.facts} memories written in place of {done.replaced} earlier ones; "
        f"tokens spent: {done.input_tokens} in, {done.output_tokens} out"
    ]
    if done.already:
        lines.append(
            f"{done.already} turns were extracted this way already (another model "
            "(MEMSTREAM_CHAT_MODEL), --strategy or MEMSTREAM_EXTRACTION_PROMPT extracts again)"
        )
    if done.gone:
        lines.append(f"{done.gone} turns have no memory left to derive from (forgotten, evicted)")
    if done.failed:
        lines.append(
            f"{len(done.failed)} turns the model could not answer (refused, or no JSON twice), "
            f"left as they were: {', '.join(done.failed)}"
        )
    if done.stopped:
        lines.append(f"stopped: {done.stopped}")
    return "\n".join(lines)
