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
              alias, drops the old generation's index; `forget --erase` rewrites Redis's
              files so an erased tenant's plaintext is gone from its disk (BGREWRITEAOF,
              BGSAVE, and INFO to wait for them).
    server    `memstream serve`: the agent's reads and search, and writes of only what is
              state rather than projection: sessions' working memory (`{ns}:wm:*`, each put a
              compare-and-set in a script), its heartbeat (`{ns}:process:*`) and the API keys
              (`{ns}:apikeys`, for `memstream keys` run as this user). Every other key of the
              namespace is read-only to it (Redis 7's `%R~` key permission), so a memory
              reaches the projection only through the log.

Nobody gets @admin or @dangerous as a whole, nor CONFIG (which can read passwords): after a
very large delete the append-only file is left for Redis's own rewrite policy (`compact`
skips when not allowed), and an erasure that cannot ask whether Redis keeps snapshots writes
one anyway (`connection.rewrite_persistence`).
"""

from __future__ import annotations

from memstream.projections.schema import Keyspace

__all__ = ["REDIS_ROLES", "redis_acl", "redis_acl_command"]

REDIS_ROLES = ("agent", "worker", "importer", "server")

# redis-py's connection handshake (HELLO, AUTH, CLIENT SETINFO) and PING.
_CONNECT = ("+@connection",)
# Reads of any kind, but none of the commands Redis marks dangerous (KEYS, DEBUG, ...).
_READ = ("+@read", "-@dangerous")
_WRITE = ("+@read", "+@write", "-@dangerous")
# Key patterns do not filter what SCAN and RANDOMKEY return: they would show the names of
# other namespaces' keys. Only the importer lists keys (a retired generation's, verify's).
_NO_LISTING = ("-scan", "-randomkey")
# The apply-once, swap and session-put scripts (redis-py's registered scripts: EVALSHA, EVAL
# when the server does not know the script yet, SCRIPT LOAD/EXISTS in pipelines). A script's
# commands are held to its caller's key patterns.
_SCRIPTS = ("+evalsha", "+eval", "+script|load", "+script|exists")
# A search reads the live generation in the same transaction (projections.live_model), so a
# swap to a generation of another embedding model cannot fall between the two; recall reads
# thread neighbours with a read-only script (neighbours.lua: EVALSHA_RO, EVAL_RO).
_SEARCH = ("+multi", "+exec", "+discard", "+FT.SEARCH", "+evalsha_ro", "+eval_ro")
_RIGHTS = {
    # recall: FT.SEARCH over the live alias (in a transaction with the live generation's
    # number); memories, orders and positions read by key.
    "agent": (*_READ, *_NO_LISTING, *_SEARCH),
    # the projection: FT.INFO (does the generation's index exist?), FT.CREATE and FT.ALIASADD
    # on first start; the rest through the scripts.
    "worker": (
        *_WRITE,
        *_NO_LISTING,
        *_SCRIPTS,
        *_SEARCH,
        "+FT.INFO",
        "+FT.CREATE",
        "+FT.ALIASADD",
    ),
    # working memory's compare-and-set (put_session.lua); writes reach only the keys of
    # `_keys`' read-write patterns.
    "server": (*_WRITE, *_NO_LISTING, *_SCRIPTS, *_SEARCH),
    # replay, verify, stats: a new generation's index, FT.ALIASUPDATE (inside the swap
    # script), FT.DROPINDEX and SCAN of the retired generation, FT.AGGREGATE for per-tenant
    # counts.
    "importer": (
        *_WRITE,
        *_SCRIPTS,
        *_SEARCH,
        "+FT.AGGREGATE",
        "+FT.INFO",
        "+FT.CREATE",
        "+FT.ALIASADD",
        "+FT.ALIASUPDATE",
        "+FT.DROPINDEX",
        # `reshard` copies sessions' working memory with a compare-and-set on the new shard.
        "+watch",
        "+unwatch",
        # `forget --erase`: rewrite the files, wait for it.
        "+bgrewriteaof",
        "+bgsave",
        "+info",
    ),
}


def redis_acl(role: str, keys: Keyspace) -> tuple[str, ...]:
    """The ACL rules (as `ACL SETUSER` takes them, after the user's name and password) that
    `role` needs on `keys`' namespace."""
    if role not in _RIGHTS:
        raise ValueError(f"unknown role {role!r}; the roles are {', '.join(REDIS_ROLES)}")
    return (
        "resetkeys",
        *_keys(role, keys.namespace),
        "resetchannels",
        "-@all",
        *_CONNECT,
        *_RIGHTS[role],
    )


def redis_acl_command(role: str, keys: Keyspace, user: str | None = None) -> str:
    """The `ACL SETUSER` line an operator runs (PASSWORD is theirs to fill in)."""
    return f"ACL SETUSER {user or role} on >PASSWORD {' '.join(redis_acl(role, keys))}"


def _keys(role: str, namespace: str) -> tuple[str, ...]:
    """The key patterns `role` may touch: its whole namespace, or, for the server, the
    namespace to read and its own state to write."""
    if role == "server":
        return (
            f"%R~{namespace}:*",
            # The search module declares FT.SEARCH's index argument a key it may write, so a
            # read-only pattern refuses the search: the index names and alias are given whole
            # (they are not keys; only FT commands, of which it has FT.SEARCH, use them).
            f"~{namespace}:memories*",
            f"~{namespace}:wm:*",
            f"~{namespace}:process:*",
            f"~{namespace}:apikeys",
        )
    return (f"~{namespace}:*",)
