"""Two generations of one tenant compared memory by memory: what `memstream verify` reports,
whatever backend holds them.

Two projections are the same when every tenant has the same memories (ids, contents, types,
threads, roles, importance, timestamps, metadata, source events, embedding models — so
summaries and evictions are covered) and the same tombstones. Vectors are not compared: they
follow from the content and the model, both compared. Nor is a store item's `expires_at`: a
read that refreshes it is not in the log, so a rebuild has the put's own deadline
(docs/integrations.md, TTL).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Set

from memstream.memory.model import Memory
from memstream.memory.ports import Difference

__all__ = ["differences"]

_NOT_COMPARED = {"expires_at"}


def differences(
    tenant: str,
    live: Mapping[str, Memory | None],
    rebuilt: Mapping[str, Memory | None],
    live_dead: Set[str],
    rebuilt_dead: Set[str],
) -> list[Difference]:
    """How `tenant`'s memories by id (None: listed, but its record is missing) and tombstones
    differ between the live generation and a rebuilt one."""
    found = []
    for memory_id in sorted(live.keys() | rebuilt.keys()):
        one, other = live.get(memory_id), rebuilt.get(memory_id)
        if memory_id not in live:
            found.append(Difference(tenant, memory_id, "only in the rebuild"))
        elif memory_id not in rebuilt:
            found.append(Difference(tenant, memory_id, "only in the live projection"))
        elif one is None or other is None:
            where = "live projection" if one is None else "rebuild"
            what = f"in the eviction order but its hash is missing in the {where}"
            found.append(Difference(tenant, memory_id, what))
        else:
            for f in dataclasses.fields(Memory):
                if f.name in _NOT_COMPARED:
                    continue
                a, b = getattr(one, f.name), getattr(other, f.name)
                if f.name == "provenance" and a is None:
                    continue  # written before lineage was kept: the rebuild adds it
                if a != b:
                    what = f"{f.name} differs: live {a!r}, rebuilt {b!r}"
                    found.append(Difference(tenant, memory_id, what))
    for dead, only_in_live in ((live_dead - rebuilt_dead, True), (rebuilt_dead - live_dead, False)):
        if dead:
            ids = ", ".join(sorted(dead))
            where = "the live projection" if only_in_live else "the rebuild"
            found.append(Difference(tenant, "", f"only in {where}: {ids}"))
    return found
