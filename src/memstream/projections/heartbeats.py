"""The processes' heartbeats in Redis: one small hash per process under the namespace
(`Keyspace.process`), expiring unless the process writes it again (`health.Heartbeat`), and
each process's reported lags over the last hour (`Keyspace.process_lags`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime

import redis
from redis.typing import EncodableT, FieldT

from memstream.errors import ConfigurationError, RedisUnavailableError
from memstream.memory.ports import LAG_HISTORY, LagSeries, ProcessReport
from memstream.projections.connection import redis_errors, text
from memstream.projections.schema import Keyspace

__all__ = ["RedisProcessRegistry"]


class RedisProcessRegistry:
    def __init__(self, client: redis.Redis, keys: Keyspace, *, url: str = "") -> None:
        self._client = client
        self._keys = keys
        self._url = url

    def write(self, report: ProcessReport, ttl_s: int) -> None:
        fields: dict[FieldT, EncodableT] = {
            "kind": report.kind,
            "pid": str(report.pid),
            "host": report.host,
            "seen_at": _stamp(report.seen_at),
            "metrics_port": str(report.metrics_port or ""),
            "lag": "" if report.lag is None else str(report.lag),
            "last_error": report.last_error,
            "last_error_at": _stamp(report.last_error_at),
        }
        key = self._keys.process(report.host, report.pid)
        with self._errors("writing the heartbeat"):
            pipe = self._client.pipeline(transaction=True)
            pipe.hset(key, mapping=fields)
            pipe.expire(key, ttl_s)
            if report.lag is not None:
                lags = self._keys.process_lags(report.kind, report.host, report.pid)
                at = report.seen_at.timestamp()
                pipe.zadd(lags, {f"{at:.3f}:{report.lag}": at})
                pipe.zremrangebyscore(lags, "-inf", f"({at - LAG_HISTORY.total_seconds()}")
                pipe.expire(lags, int(LAG_HISTORY.total_seconds()))
            pipe.execute()

    def remove(self, host: str, pid: int) -> None:
        with self._errors("removing the heartbeat"):
            self._client.delete(self._keys.process(host, pid))

    def reports(self) -> list[ProcessReport]:
        reports = []
        with redis_errors(self._url, "reading the processes' heartbeats"):
            for key in self._client.scan_iter(match=self._keys.process_pattern, count=1000):
                raw: Mapping[bytes, bytes] = self._client.hgetall(key)  # type: ignore[assignment]
                if raw:
                    reports.append(_report({text(k): text(v) for k, v in raw.items()}))
        return sorted(reports, key=lambda r: (r.kind, r.host, r.pid))

    def lags(self) -> list[LagSeries]:
        found = []
        prefix = self._keys.process_lags_pattern[:-1]
        with redis_errors(self._url, "reading the processes' lags"):
            for key in self._client.scan_iter(match=self._keys.process_lags_pattern, count=1000):
                kind, rest = text(key).removeprefix(prefix).split(":", 1)
                host, pid = rest.rsplit(":", 1)
                members: list[bytes] = self._client.zrange(key, 0, -1)  # type: ignore[assignment]
                points = []
                for member in members:
                    at, lag = text(member).split(":")
                    points.append((datetime.fromtimestamp(float(at), UTC), int(lag)))
                if points:
                    found.append(LagSeries(kind, host, int(pid), tuple(points)))
        return sorted(found, key=lambda s: (s.kind, s.host, s.pid))

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        # A heartbeat is best effort: any failure of Redis (a user without the right, too) is
        # the backend's unavailability to the process beating, which logs it and beats again.
        try:
            with redis_errors(self._url, doing):
                yield
        except ConfigurationError as exc:
            raise RedisUnavailableError(str(exc)) from exc
        except redis.RedisError as exc:
            raise RedisUnavailableError(f"Redis refused {doing}: {exc}") from exc


def _stamp(at: datetime | None) -> str:
    return "" if at is None else f"{at.timestamp():.3f}"


def _report(fields: Mapping[str, str]) -> ProcessReport:
    def when(raw: str) -> datetime | None:
        return datetime.fromtimestamp(float(raw), UTC) if raw else None

    return ProcessReport(
        kind=fields.get("kind", "?"),
        pid=int(fields.get("pid", "0")),
        host=fields.get("host", "?"),
        seen_at=when(fields.get("seen_at", "")) or datetime.fromtimestamp(0, UTC),
        metrics_port=int(fields["metrics_port"]) if fields.get("metrics_port") else None,
        lag=int(fields["lag"]) if fields.get("lag") else None,
        last_error=fields.get("last_error", ""),
        last_error_at=when(fields.get("last_error_at", "")),
    )
