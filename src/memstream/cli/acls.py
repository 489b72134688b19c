"""`memstream acls`: the least-privilege Kafka ACLs and Redis ACL users of this namespace, as
the commands an operator runs (docs/operations.md, "Security").

It prints, and changes nothing: creating ACLs is the operator's, with the admin's credentials.
"""

from __future__ import annotations

import argparse

from memstream.deployment import Deployment
from memstream.streams.acls import KAFKA_ROLES, kafka_grants

__all__ = ["acl_commands", "register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    acls = commands.add_parser(
        "acls", help="print the Kafka ACLs and Redis ACL users each component needs"
    )
    acls.add_argument("--role", choices=KAFKA_ROLES, help="only this component's")
    acls.set_defaults(run=_run)


def acl_commands(deployment: Deployment, roles: tuple[str, ...] = KAFKA_ROLES) -> list[str]:
    """For each role: its `kafka-acls` commands, then its `ACL SETUSER` line."""
    lines: list[str] = []
    for role in roles:
        lines.append(f"# {role}")
        lines += [
            grant.command(deployment.settings.bootstrap_servers)
            for grant in kafka_grants(role, deployment.topics)
        ]
        redis_user = deployment.projection.access_command(role)
        if redis_user is not None:
            lines.append(redis_user)
    return lines


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    roles = (args.role,) if args.role else KAFKA_ROLES
    print("\n".join(acl_commands(deployment, roles)))
    return 0
