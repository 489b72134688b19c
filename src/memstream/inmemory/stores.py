"""What a deployment keeps beside the in-memory projection: the server's API keys, sessions'
working memory (a compare-and-set on each session's version, with a TTL) and the processes'
heartbeats (each lasting its TTL), the tokens spent per day — the `ApiKeyStore`,
`WorkingMemoryStore`, `ProcessRegistry` and `TokenLedger` ports, with the Redis ones'
semantics. Deadlines are wall-clock seconds, as Redis's expiries are; a lapsed entry reads as
absent."""

from __future__ import annotations

import time
from datetime import date

from memstream.errors import StaleSessionError
from memstream.inmemory.state import Namespace, Session
from memstream.memory.ports import LAG_HISTORY, LagSeries, ProcessReport, StoredSession
from memstream.memory.tenancy import TenantId

__all__ = ["InMemoryApiKeys", "InMemoryProcesses", "InMemoryTokenLedger", "InMemoryWorkingMemory"]


class InMemoryApiKeys:
    def __init__(self, state: Namespace) -> None:
        self._state = state

    def put(self, digest: str, record: str) -> None:
        with self._state.lock:
            self._state.api_keys[digest] = record

    def get(self, digest: str) -> str | None:
        with self._state.lock:
            return self._state.api_keys.get(digest)

    def delete(self, digest: str) -> bool:
        with self._state.lock:
            return self._state.api_keys.pop(digest, None) is not None

    def records(self) -> dict[str, str]:
        with self._state.lock:
            return dict(self._state.api_keys)

    def count(self) -> int:
        with self._state.lock:
            return len(self._state.api_keys)


class InMemoryWorkingMemory:
    def __init__(self, state: Namespace) -> None:
        self._state = state

    def _live(self, tenant: TenantId, session_id: str) -> Session | None:
        """The session, unless its TTL ran out (then it is gone, as Redis expires it)."""
        key = (tenant, session_id)
        held = self._state.sessions.get(key)
        if held is not None and held.expires_at is not None and held.expires_at <= time.time():
            del self._state.sessions[key]
            return None
        return held

    async def get(self, tenant: TenantId, session_id: str) -> StoredSession | None:
        with self._state.lock:
            held = self._live(tenant, session_id)
            return StoredSession(session_id, held.document, held.version) if held else None

    async def put(
        self,
        tenant: TenantId,
        session_id: str,
        document: str,
        *,
        expected_version: int,
        ttl_s: int | None,
        owner: str | None,
    ) -> int:
        with self._state.lock:
            held = self._live(tenant, session_id)
            current = held.version if held is not None else 0
            if current != expected_version:
                raise StaleSessionError(
                    f"session {session_id!r} is not at version {expected_version}: "
                    f"it is at version {current}",
                    current=current,
                )
            expires_at = None if ttl_s is None else time.time() + ttl_s
            self._state.sessions[(tenant, session_id)] = Session(
                document, current + 1, owner, expires_at
            )
            return current + 1

    async def delete(self, tenant: TenantId, session_id: str) -> bool:
        with self._state.lock:
            held = self._live(tenant, session_id)
            self._state.sessions.pop((tenant, session_id), None)
            return held is not None

    async def sessions(
        self, tenant: TenantId, *, owner: str | None, offset: int, limit: int
    ) -> tuple[int, list[str]]:
        with self._state.lock:
            ids = sorted(
                session_id
                for held_tenant, session_id in list(self._state.sessions)
                if held_tenant == tenant
                and (held := self._live(tenant, session_id)) is not None
                and (owner is None or held.owner == owner)
            )
        return len(ids), ids[offset : offset + limit]

    async def aclose(self) -> None:
        """Nothing to close: no connection was opened."""


class InMemoryProcesses:
    def __init__(self, state: Namespace) -> None:
        self._state = state

    def write(self, report: ProcessReport, ttl_s: int) -> None:
        with self._state.lock:
            self._state.processes[(report.host, report.pid)] = (report, time.time() + ttl_s)
            if report.lag is not None:
                at = report.seen_at
                series = self._state.lags.setdefault((report.kind, report.host, report.pid), [])
                series[:] = sorted(
                    [(t, lag) for t, lag in series if t >= at - LAG_HISTORY] + [(at, report.lag)]
                )

    def remove(self, host: str, pid: int) -> None:
        with self._state.lock:
            self._state.processes.pop((host, pid), None)

    def reports(self) -> list[ProcessReport]:
        now = time.time()
        with self._state.lock:
            live = [report for report, until in self._state.processes.values() if until > now]
        return sorted(live, key=lambda r: (r.kind, r.host, r.pid))

    def lags(self) -> list[LagSeries]:
        with self._state.lock:
            found = [
                LagSeries(kind, host, pid, tuple(points))
                for (kind, host, pid), points in self._state.lags.items()
                if points
            ]
        return sorted(found, key=lambda s: (s.kind, s.host, s.pid))


class InMemoryTokenLedger:
    def __init__(self, state: Namespace) -> None:
        self._state = state

    def spend(self, day: date, tenant: TenantId, purpose: str, tokens: int) -> None:
        with self._state.lock:
            spent = self._state.tokens.setdefault(day, {})
            spent[(tenant, purpose)] = spent.get((tenant, purpose), 0) + tokens

    def spent(self, day: date, tenant: TenantId | None = None) -> dict[tuple[str, str], int]:
        with self._state.lock:
            spent = self._state.tokens.get(day, {})
            return {k: v for k, v in spent.items() if tenant is None or k[0] == tenant}
