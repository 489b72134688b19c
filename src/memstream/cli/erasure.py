"""`memstream erasure encrypt --to NS | rewrap`: make an old log erasable, rotate the master key.

`encrypt` copies this namespace's memory log into namespace NS with every event sealed under
its tenant's data key (streams.migrate); NS's worker (or `memstream replay` there) builds the
same projection from it. `rewrap` writes every data key of the keys topic again, wrapped by
the current master key (the end of a rotation, docs/erasure.md).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from memstream.config import _namespace
from memstream.deployment import Deployment
from memstream.errors import ConfigurationError
from memstream.streams.migrate import seal_copy

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    erasure = commands.add_parser("erasure", help="seal an old log; re-wrap data keys")
    actions = erasure.add_subparsers(dest="action", required=True, metavar="ACTION")
    encrypt = actions.add_parser("encrypt", help="copy the log, sealed, into another namespace")
    encrypt.add_argument("--to", required=True, type=_namespace, metavar="NAMESPACE")
    encrypt.add_argument(
        "--allow-dead-letters",
        action="store_true",
        help="finish even if some messages are no readable event (they are not copied)",
    )
    encrypt.set_defaults(run=_encrypt)
    rewrap = actions.add_parser("rewrap", help="wrap every data key with the current master key")
    rewrap.set_defaults(run=_rewrap)


def _encrypt(args: argparse.Namespace, deployment: Deployment) -> int:
    target = deployment.with_namespace(args.to, encryption=True)
    sealer = target.sealer()
    if sealer is None:  # encryption is on for the target: a missing key raised already
        raise ConfigurationError("no keyring for the target namespace")

    async def copy() -> int:
        await deployment.ensure_topics()
        await target.ensure_topics()
        sealed = await seal_copy(
            deployment.kafka,
            deployment.topics,
            target.topics,
            sealer=sealer,
            opener=deployment.keyring(),
            embedding_model=deployment.embedding_model,
            default_importance=deployment.settings.default_importance,
            allow_unreadable=args.allow_dead_letters,
            progress=lambda n: print(f"\rsealed {n} events", end="", file=sys.stderr),
        )
        print(
            f"\ncopied {sealed.copied} events sealed into {target.topics.memory} in "
            f"{sealed.elapsed_s:.1f}s"
            + (f"; left out: {sealed.unreadable}" if sealed.unreadable else ""),
            file=sys.stderr,
        )
        return sealed.copied

    try:
        asyncio.run(copy())
    finally:
        target.close()
    print(
        f"next: run a worker with MEMSTREAM_NAMESPACE={args.to}, point the agents at it, then "
        "delete the old namespace's topics (docs/erasure.md)",
        file=sys.stderr,
    )
    return 0


def _rewrap(args: argparse.Namespace, deployment: Deployment) -> int:
    keyring = deployment.keyring()
    if keyring is None:
        raise ConfigurationError(
            "no master key is configured, so there are no data keys to re-wrap; set "
            "MEMSTREAM_MASTER_KEY (docs/erasure.md)"
        )
    count = keyring.rewrap()
    print(
        f"re-wrapped {count} data keys with master key {keyring.state.masters.kek_id}; once the "
        f"keys topic {deployment.topics.keys} is compacted, drop MEMSTREAM_PREVIOUS_MASTER_KEYS",
        file=sys.stderr,
    )
    return 0
