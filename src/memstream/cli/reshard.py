"""`memstream reshard --to URL,URL,...`: move the projection onto other Redis shards, online.

Recall keeps answering from the current layout while each moving partition's new shard is
filled from the log; then the new layout is stored on shard 0 and every process (agents,
servers, workers) follows it without a restart; once the new shards hold everything their
old ones applied, the moved tenants are dropped from the old shards (docs/scaling.md).
"""

from __future__ import annotations

import argparse
import sys

from memstream.deployment import Deployment
from memstream.operations import reshard

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser("reshard", help="move the projection onto other Redis shards")
    command.add_argument(
        "--to",
        required=True,
        metavar="URL,URL,...",
        help="the new shards' Redis URLs, shard 0 first (it stays: the layout lives there)",
    )
    command.add_argument(
        "--timeout", type=float, default=300.0, help="wait this long for the switch to settle"
    )
    command.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    urls = [url.strip() for url in args.to.split(",") if url.strip()]
    done = reshard(
        deployment, urls, say=lambda line: print(line, file=sys.stderr), timeout_s=args.timeout
    )
    print(
        f"reshard: layout {done.new.version} live on {done.new.count} shards; "
        f"{len(done.moved)} partitions moved in {done.elapsed_s:.1f}s (warm-up "
        f"{done.warm_s:.1f}s); a moved tenant's recall could answer from its old shard for "
        f"up to {done.window_s:.1f}s after the switch, and its newest memories reached the "
        f"new shard {done.caught_up_s:.1f}s after it; {done.dropped} tenants dropped from "
        "their old shards"
    )
    return 0
