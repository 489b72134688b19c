"""The write path's tombstone check, coalesced: which ids of a write were forgotten before.

Every write asks before anything is sent (a forgotten id is never used again). Asked one by
one in a thread, each write paid a thread hop and a Redis round trip of its own: at 16
concurrent writers that was most of what the server did beyond a bare endpoint (bench serve).
Here the checks that arrive while a read is out wait for the next one, which asks for all of
them at once on the event loop (`TombstoneReader`: one round trip per shard). Every check is
answered by a read that began after it was asked, so a write that follows an acknowledged
delete still sees its tombstone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from memstream.memory.ports import TombstoneReader

__all__ = ["TombstoneChecks"]


@dataclass(frozen=True, slots=True)
class _Check:
    tenant: str
    ids: frozenset[str]
    answer: asyncio.Future[set[str]] = field(compare=False)


class TombstoneChecks:
    """Coalesces concurrent tombstone checks over `reader` (on its one event loop)."""

    def __init__(self, reader: TombstoneReader) -> None:
        self._reader = reader
        self._waiting: list[_Check] = []
        self._reading: asyncio.Task[None] | None = None

    async def forgotten(self, tenant: str, memory_ids: Sequence[str]) -> set[str]:
        """Which of `memory_ids` are tombstoned in `tenant`, read after this call began."""
        if not memory_ids:
            return set()
        check = _Check(tenant, frozenset(memory_ids), asyncio.get_running_loop().create_future())
        self._waiting.append(check)
        if self._reading is None:
            self._reading = asyncio.create_task(self._read_while_asked())
        # A request cancelled meanwhile leaves the read to finish for the others.
        return await asyncio.shield(check.answer)

    async def _read_while_asked(self) -> None:
        batch: list[_Check] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                asked: dict[str, set[str]] = {}
                for check in batch:
                    asked.setdefault(check.tenant, set()).update(check.ids)
                try:
                    found = await self._reader.forgotten(asked)
                except Exception as exc:  # noqa: BLE001 - each waiting write gets the error
                    found = dict.fromkeys(asked, exc)
                for check in batch:
                    answer = found[check.tenant]
                    if isinstance(answer, Exception):
                        check.answer.set_exception(answer)
                    else:
                        check.answer.set_result(answer & check.ids)
                batch = []
        except BaseException:  # cancelled (the loop closing): nobody is left waiting forever
            for check in [*batch, *self._waiting]:
                check.answer.cancel()
            self._waiting = []
            raise
        finally:
            self._reading = None
