"""`memstream keys create | revoke | list`: the API keys of `memstream serve`.

`create` prints the new key alone on stdout (and nothing else there), so scripts can capture
it; it is never shown again. Redis keeps only its hash.
"""

from __future__ import annotations

import argparse
import sys

from memstream.deployment import Deployment
from memstream.errors import InvalidInputError
from memstream.server.parts import api_keys

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = commands.add_parser("keys", help="create, revoke or list API keys of `serve`")
    actions = keys.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="a new key; prints it alone on stdout")
    create.add_argument("--tenant", help="the one tenant the key may read and write")
    create.add_argument("--admin", action="store_true", help="a key for every tenant")
    create.set_defaults(run=_create)
    revoke = actions.add_parser("revoke", help="revoke a key, by the key or its key id")
    revoke.add_argument("key")
    revoke.set_defaults(run=_revoke)
    listing = actions.add_parser("list", help="key ids, tenants and creation times")
    listing.set_defaults(run=_list)


def _create(args: argparse.Namespace, deployment: Deployment) -> int:
    if bool(args.tenant) == bool(args.admin):
        raise InvalidInputError("say whom the key is for: --tenant T, or --admin for all tenants")
    key, made = api_keys(deployment).create(None if args.admin else args.tenant)
    print(key)
    scope = "every tenant (admin)" if made.admin else f"tenant {made.tenant!r}"
    print(f"key {made.key_id} created for {scope}; it is not shown again", file=sys.stderr)
    return 0


def _revoke(args: argparse.Namespace, deployment: Deployment) -> int:
    if api_keys(deployment).revoke(args.key):
        print("key revoked", file=sys.stderr)
        return 0
    print("no such key (nothing revoked)", file=sys.stderr)
    return 1


def _list(args: argparse.Namespace, deployment: Deployment) -> int:
    for key in api_keys(deployment).all():
        scope = "admin" if key.admin else f"tenant={key.tenant}"
        print(f"{key.key_id}\t{scope}\t{key.created_at.isoformat()}")
    return 0
