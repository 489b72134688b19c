"""What a running process says about itself, for `memstream status`: its last error and its
consumer lag, kept in a small hash in Redis under the namespace that expires when the process
stops refreshing it.

`LastError` is a logging handler: it keeps the last WARNING or worse of memstream's own
loggers, and the last ERROR or worse of the libraries' (Faust, aiokafka, redis-py), which is
where every failure a process lives through is reported — a Redis outage it retries through,
a message it dead-lettered, a broker it cannot reach. `Heartbeat` writes the process's hash
(`Keyspace.process`) every few seconds from a daemon thread: its kind, pid, host, metrics
port, consumer lag and last error. `heartbeats` reads them all. A process that dies leaves its
hash behind for at most the TTL, so status never shows a dead process for long.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import redis
from redis.typing import EncodableT, FieldT

from memstream.projections.schema import Keyspace

__all__ = ["HEARTBEAT_TTL_S", "Heartbeat", "LastError", "ProcessReport", "heartbeats"]

log = logging.getLogger(__name__)

HEARTBEAT_S = 2.0
# Several missed beats before a process counts as gone: a worker busy with a long batch, or a
# Redis restarting, must not make it vanish from `memstream status`.
HEARTBEAT_TTL_S = 15
_MAX_ERROR_CHARS = 500


@dataclass(frozen=True, slots=True)
class ProcessReport:
    """One process's last heartbeat."""

    kind: str
    pid: int
    host: str
    seen_at: datetime
    metrics_port: int | None
    lag: int | None
    last_error: str
    last_error_at: datetime | None


class LastError(logging.Handler):
    """Keeps the last warning of memstream's loggers and the last error of anyone's."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self._last: tuple[str, float] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        ours = record.name == "memstream" or record.name.startswith("memstream.")
        if not ours and record.levelno < logging.ERROR:
            return  # libraries warn about routine things (a slow timer, a rebalance)
        try:
            text = f"{record.levelname} {record.name}: {record.getMessage()}"
        except Exception:  # noqa: BLE001 - a malformed log call must not break logging
            text = f"{record.levelname} {record.name}: {record.msg!r}"
        self._last = (text[:_MAX_ERROR_CHARS], record.created)

    @property
    def last(self) -> tuple[str, float] | None:
        """The text of the last error and its time (seconds since the epoch), if any."""
        return self._last


class Heartbeat:
    """A daemon thread that keeps this process's hash in Redis fresh until `stop()`."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keyspace,
        kind: str,
        *,
        errors: LastError,
        lag: Callable[[], int | None] = lambda: None,
        metrics_port: int | None = None,
        interval_s: float = HEARTBEAT_S,
    ) -> None:
        self._client = client
        self._kind = kind
        self._errors = errors
        self._lag = lag
        self._metrics_port = metrics_port
        self._interval_s = interval_s
        self._pid = os.getpid()
        self._host = socket.gethostname()
        self._key = keys.process(self._host, self._pid)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memstream-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(self._interval_s + 5.0)
        with contextlib.suppress(redis.RedisError):  # it expires by itself
            self._client.delete(self._key)

    def beat(self) -> None:
        """Write the hash now."""
        lag = self._lag()
        last = self._errors.last
        fields: dict[FieldT, EncodableT] = {
            "kind": self._kind,
            "pid": str(self._pid),
            "host": self._host,
            "seen_at": f"{time.time():.3f}",
            "metrics_port": str(self._metrics_port or ""),
            "lag": "" if lag is None else str(lag),
            "last_error": last[0] if last else "",
            "last_error_at": f"{last[1]:.3f}" if last else "",
        }
        pipe = self._client.pipeline(transaction=True)
        pipe.hset(self._key, mapping=fields)
        pipe.expire(self._key, HEARTBEAT_TTL_S)
        pipe.execute()

    def _run(self) -> None:
        failing = False
        while not self._stopping.is_set():
            try:
                self.beat()
                failing = False
            except redis.RedisError as exc:
                if not failing:  # once per outage, not every beat
                    log.warning("the heartbeat for `memstream status` failed: %s", exc)
                failing = True
            self._stopping.wait(self._interval_s)


def heartbeats(client: redis.Redis, keys: Keyspace) -> list[ProcessReport]:
    """Every process of the namespace that beat within the TTL, by kind then pid."""
    reports = []
    for key in client.scan_iter(match=keys.process_pattern, count=1000):
        raw: Mapping[bytes, bytes] = client.hgetall(key)  # type: ignore[assignment]
        if raw:
            reports.append(_report({k.decode(): v.decode() for k, v in raw.items()}))
    return sorted(reports, key=lambda r: (r.kind, r.host, r.pid))


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
