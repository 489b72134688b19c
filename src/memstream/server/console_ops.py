"""What the console's operations page reads and does, over a `Deployment`: the processes'
heartbeats, the shards, the dead letters (and retrying them), erasing a tenant. The same
calls as `memstream status`, `stats`, `dead-letters` and `forget --erase`; the page is the
admin's (server/console.py), keys are the app's `ApiKeys`."""

from __future__ import annotations

from collections import Counter

from memstream.deployment import Deployment
from memstream.memory.ports import ProcessReport, ShardReport
from memstream.memory.tenancy import TenantId
from memstream.operations import Erasure, dead_letter_retry, erase_tenant
from memstream.streams.dead_letters import DeadLetterLog, Outcome, read_dead_letters

__all__ = ["ConsoleOperations"]


class ConsoleOperations:
    """The operations of one deployment, for the console (each call as the CLI makes it)."""

    def __init__(self, deployment: Deployment) -> None:
        self._deployment = deployment

    def processes(self) -> list[ProcessReport]:
        """The workers' and servers' last heartbeats (lag, last error), newest first."""
        reports = self._deployment.projection.processes().reports()
        return sorted(reports, key=lambda r: r.seen_at, reverse=True)

    def shards(self) -> list[ShardReport]:
        """Every projection shard: where, whether it answers, memories, memory used."""
        return self._deployment.projection.shard_reports()

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
