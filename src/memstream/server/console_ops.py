"""What the console's operations page reads and does, over a `Deployment`: the brokers, the
processes' heartbeats and lags, the shards, the tenants' memory, the dead letters (and
retrying them), erasing a tenant. The same calls as `memstream status`, `stats`,
`dead-letters` and `forget --erase`; the page is the admin's (server/console.py), keys are the
app's `ApiKeys`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from memstream.deployment import Deployment
from memstream.memory.ports import LagSeries, ProcessReport, ShardReport, TenantStats
from memstream.memory.tenancy import TenantId
from memstream.operations import Erasure, dead_letter_retry, erase_tenant
from memstream.streams.dead_letters import DeadLetterLog, Outcome, read_dead_letters
from memstream.streams.topics import ClusterReport, cluster_report

__all__ = ["ConsoleOperations", "TenantUse"]


@dataclass(frozen=True, slots=True)
class TenantUse:
    """One tenant's memory: how many (with the oldest and newest), on which shard, and about
    how many bytes of it: the shard's memory used in proportion to the tenant's share of its
    memories (Redis cannot say which tenant an index's bytes belong to)."""

    stats: TenantStats
    shard: int
    approx_bytes: int


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

    def tenants(self, shards: list[ShardReport]) -> list[TenantUse]:
        """Every tenant's memories (`memstream stats`), most first, with its shard and its
        share of the shard's bytes (`shards`, as `shards()` read them)."""
        shard_of = self._deployment.projection.shard_of
        per_memory = {
            s.shard: s.used_bytes / s.memories for s in shards if s.reachable and s.memories
        }
        used = []
        for stats in self._deployment.status().tenant_stats():
            shard = shard_of(stats.tenant)
            share = round(per_memory.get(shard, 0.0) * stats.memories)
            used.append(TenantUse(stats, shard, share))
        return sorted(used, key=lambda u: (-u.stats.memories, u.stats.tenant))

    async def brokers(self) -> ClusterReport:
        """The brokers and the memory topic's partitions as the cluster reports them now."""
        return await cluster_report(self._deployment.kafka, self._deployment.topics.memory)

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
