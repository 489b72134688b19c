"""What the console's operations page reads and does, over a `Deployment`: the processes'
heartbeats and lags, the shards, the tenants' memory, the dead letters (and retrying them),
erasing a tenant. The same
calls as `memstream status`, `stats`, `dead-letters` and `forget --erase`; the page is the
admin's (server/console.py), keys are the app's `ApiKeys`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from memstream.deployment import Deployment
from memstream.memory.ports import LagSeries, ProcessReport, ShardReport, TenantStats
from memstream.memory.tenancy import TenantId
from memstream.operations import Erasure, dead_letter_retry, erase_tenant
from memstream.streams.dead_letters import DeadLetterLog, Outcome, read_dead_letters

__all__ = ["ConsoleOperations", "TenantUse"]


@dataclass(frozen=True, slots=True)
class TenantUse:
    """One tenant's memory: how many (with the oldest and newest), and on which shard."""

    stats: TenantStats
    shard: int


class ConsoleOperations:
    """The operations of one deployment, for the console (each call as the CLI makes it)."""

    def __init__(self, deployment: Deployment) -> None:
        self._deployment = deployment

    def processes(self) -> list[ProcessReport]:
        """The workers' and servers' last heartbeats (lag, last error), newest first."""
        reports = self._deployment.projection.processes().reports()
        return sorted(reports, key=lambda r: r.seen_at, reverse=True)

    def lags(self) -> list[LagSeries]:
        """Each process's reported lag over the last hour it reported."""
        return self._deployment.projection.processes().lags()

    def shards(self) -> list[ShardReport]:
        """Every projection shard: where, whether it answers, memories, memory used."""
        return self._deployment.projection.shard_reports()

    def tenants(self) -> list[TenantUse]:
        """Every tenant's memories (`memstream stats`), most first, with its shard."""
        shard_of = self._deployment.projection.shard_of
        used = [TenantUse(t, shard_of(t.tenant)) for t in self._deployment.status().tenant_stats()]
        return sorted(used, key=lambda u: (-u.stats.memories, u.stats.tenant))

    async def dead_letters(self) -> DeadLetterLog:
        return await read_dead_letters(self._deployment.kafka, self._deployment.topics)

    async def retry(self, code: str | None) -> Counter[Outcome]:
        """Re-drive the pending dead letters (of `code`, if given); what became of each."""
        letters = (await self.dead_letters()).pending(code=code)
        if not letters:
            return Counter()
        async with dead_letter_retry(self._deployment) as retrying:
            return Counter(retried.outcome for retried in await retrying.retry(letters))

    def erase(self, tenant: TenantId) -> Erasure:
        """Crypto-shred `tenant` (`memstream forget --tenant T --erase`): blocks until done."""
        return erase_tenant(self._deployment, tenant)
