"""The Redis rights each component needs on one namespace, and nothing more
(docs/operations.md, "Security").

Every key of a namespace, the search indexes and their alias included, starts with `{ns}:`
(projections/schema.py), so one key pattern confines a user to its namespace: another
namespace's memories are out of reach even for the worker. The search module's commands have
no ACL category in Redis 7.4 (Redis 8 adds @search), so they are named one by one.

    agent     recall: reads memories and the live generation, searches the index.
    worker    the projection: applies events through Lua (apply-once), creates the
              generation's index and its alias on first start, writes memories, positions and
              tombstones.
    importer  replay and verify: builds a new generation beside the live one, swaps the
              alias, drops the old generation's index.

Nobody gets @admin or @dangerous: after a very large delete the append-only file is left for
Redis's own rewrite policy (`compact` skips when not allowed).
"""

from __future__ import annotations

from memstream.projections.schema import Keyspace

__all__ = ["REDIS_ROLES", "redis_acl", "redis_acl_command"]

REDIS_ROLES = ("agent", "worker", "importer")

_CONNECT = ("+@connection",)
_READ_SEARCH = ("+FT.SEARCH", "+FT.AGGREGATE", "+FT.INFO", "+FT._LIST")
_WRITE_SEARCH = (
    "+FT.CREATE",
    "+FT.ALIASADD",
    "+FT.ALIASUPDATE",
    "+FT.DROPINDEX",
)


def redis_acl(role: str, keys: Keyspace) -> tuple[str, ...]:
    """The ACL rules (as `ACL SETUSER` takes them, after the user's name and password) that
    `role` needs on `keys`' namespace."""
    confined = ("resetkeys", f"~{keys.namespace}:*", "resetchannels", "-@all", *_CONNECT)
    if role == "agent":
        return (*confined, "+@read", *_READ_SEARCH)
    if role in ("worker", "importer"):
        return (
            *confined,
            "+@read",
            "+@write",
            "+@scripting",
            "-@dangerous",
            *_READ_SEARCH,
            *_WRITE_SEARCH,
        )
    raise ValueError(f"unknown role {role!r}; the roles are {', '.join(REDIS_ROLES)}")


def redis_acl_command(role: str, keys: Keyspace, user: str | None = None) -> str:
    """The `ACL SETUSER` line an operator runs (PASSWORD is theirs to fill in)."""
    return f"ACL SETUSER {user or role} on >PASSWORD {' '.join(redis_acl(role, keys))}"
