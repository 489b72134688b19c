"""What the live projection has applied so far, read synchronously (`--wait`, stats, tests)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import redis

from memstream.memory.ports import Marked, TenantStats
from memstream.memory.tenancy import tenant_from_token, tenant_token
from memstream.projections.connection import is_missing_index, redis_errors
from memstream.projections.schema import Fields, Keyspace

__all__ = ["ProjectionStatus"]

_MAX_TENANTS = 1_000_000
_READ_ALL_S = 1.0


class ProjectionStatus:
    def __init__(self, client: redis.Redis, keyspace: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._keys = keyspace
        self._url = url
        self._seen = 1  # the live generation as last read (a swap moves it)

    def read_live(
        self, reads: Callable[[redis.client.Pipeline, Keyspace], None], doing: str
    ) -> list[Any]:
        """The replies of what `reads` queues for the live generation's keys, in one round
        trip: queued for the generation last seen, in a transaction with a read of the live
        one, and queued again for that one when a swap has moved it since."""
        generation = self._seen
        while True:
            with redis_errors(self._url, doing):
                pipe = self._client.pipeline(transaction=True)
                pipe.get(self._keys.generation_key)
                reads(pipe, self._keys.at(generation))
                raw, *replies = pipe.execute()
            live = int(raw or 1)
            self._seen = live
            if live == generation:
                return replies
            generation = live

    def live(self) -> Keyspace:
        """The keys of the live generation, read now."""
        with redis_errors(self._url, "reading the live generation"):
            raw = self._client.get(self._keys.generation_key)
        return self._keys.at(int(raw or 1))

    def live_generation(self) -> int:
        return self.live().generation

    def unapplied(self, events: Sequence[Marked]) -> list[Marked]:
        """The events of `events` the live projection has not applied yet, in order."""

        def markers(pipe: redis.client.Pipeline, keys: Keyspace) -> None:
            for event in events:
                pipe.hexists(keys.applied(event.tenant), event.id)

        applied = self.read_live(markers, "reading applied markers")
        return [event for event, done in zip(events, applied, strict=True) if not done]

    def memory_count(self, tenant: str) -> int:
        with redis_errors(self._url, "counting memories"):
            return int(self._client.zcard(self.live().order(tenant)))

    def wait_applied(
        self,
        events: Sequence[Marked],
        timeout_s: float,
        tick: Callable[[int, int], None] | None = None,
    ) -> list[Marked]:
        """Poll until the live projection has applied `events`, or `timeout_s` passed; return
        the tenants' last events still unapplied ([] when all are applied). Only each tenant's
        last event is polled: a tenant's events are applied in the order of the log."""
        last = list({event.tenant: event for event in events}.values())
        tenants = len(last)
        deadline = time.monotonic() + timeout_s
        everyone = -_READ_ALL_S  # when every tenant's event was last read
        while True:
            # Between reads of every tenant's event (once a second, for `tick`), only the one
            # published last, the likeliest to be applied last, is read until it is: a poll is
            # one round trip of two commands however many tenants are waited on (a bench's
            # wait for 20 tenants took ~1 % of the cores from the worker it timed).
            now = time.monotonic()
            if now - everyone >= _READ_ALL_S or not self.unapplied(last[-1:]):
                last, everyone = self.unapplied(last), now
                if tick is not None:
                    tick(tenants - len(last), tenants)
            if not last or now > deadline:
                return last
            time.sleep(0.02)

    def positions(self) -> dict[str, int]:
        """The live generation's consumer positions: "topic/partition" -> last offset applied."""
        keys = self.live()
        with redis_errors(self._url, "reading positions"):
            raw: Mapping[bytes, bytes] = self._client.hgetall(keys.positions)  # type: ignore[assignment]
        return {name.decode(): int(offset) for name, offset in raw.items()}

    def tenant_stats(self, tenant: str | None = None) -> list[TenantStats]:
        """Memories per tenant with their oldest and newest timestamps (one aggregation on the
        live index); one tenant, or all of them, by tenant id."""
        query = f"@{Fields.TENANT_TAG}:{{{tenant_token(tenant)}}}" if tenant is not None else "*"
        command: list[Any] = [
            "FT.AGGREGATE", self._keys.alias, query,
            "GROUPBY", 1, f"@{Fields.TENANT_TAG}",
            "REDUCE", "COUNT", 0, "AS", "memories",
            "REDUCE", "MIN", 1, f"@{Fields.TIMESTAMP}", "AS", "oldest",
            "REDUCE", "MAX", 1, f"@{Fields.TIMESTAMP}", "AS", "newest",
            "LIMIT", 0, _MAX_TENANTS,
        ]  # fmt: skip
        with redis_errors(self._url, "aggregating memories"):
            try:
                reply = self._client.execute_command(*command)  # type: ignore[no-untyped-call]
            except redis.ResponseError as exc:
                if is_missing_index(exc):
                    return []
                raise
        stats = []
        for values in _rows(reply):
            stats.append(
                TenantStats(
                    tenant=tenant_from_token(values[Fields.TENANT_TAG.encode()].decode()),
                    memories=int(values[b"memories"]),
                    oldest=datetime.fromtimestamp(float(values[b"oldest"]), UTC),
                    newest=datetime.fromtimestamp(float(values[b"newest"]), UTC),
                )
            )
        return sorted(stats, key=lambda s: s.tenant)


def _rows(reply: Any) -> list[dict[bytes, bytes]]:
    """FT.AGGREGATE's rows as dicts, whichever protocol the client speaks (RESP3 is redis-py
    8's default; RESP2 gives a count, then flat field/value lists)."""
    if isinstance(reply, dict):
        return [row[b"extra_attributes"] for row in reply[b"results"]]
    return [dict(zip(row[::2], row[1::2], strict=True)) for row in reply[1:]]
