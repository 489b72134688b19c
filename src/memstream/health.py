"""What a running process says about itself, for `memstream status`: its last error and its
consumer lag, kept in the projection backend's `ProcessRegistry` (a small hash in Redis under
the namespace) that expires when the process stops refreshing it.

`LastError` is a logging handler: it keeps the last WARNING or worse of memstream's own
loggers, and the last ERROR or worse of the libraries' (Faust, aiokafka, redis-py), which is
where every failure a process lives through is reported — a Redis outage it retries through,
a message it dead-lettered, a broker it cannot reach. `Heartbeat` writes the process's report
every few seconds from a daemon thread: its kind, pid, host, metrics port, consumer lag and
last error. `ProcessRegistry.reports()` reads them all. A process that dies leaves its report
behind for at most the TTL, so status never shows a dead process for long.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from memstream.errors import InfrastructureError
from memstream.memory.ports import ProcessRegistry, ProcessReport

__all__ = ["HEARTBEAT_TTL_S", "Heartbeat", "LastError"]

log = logging.getLogger(__name__)

HEARTBEAT_S = 2.0
# Several missed beats before a process counts as gone: a worker busy with a long batch, or a
# Redis restarting, must not make it vanish from `memstream status`.
HEARTBEAT_TTL_S = 15
_MAX_ERROR_CHARS = 500


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
    """A daemon thread that keeps this process's report fresh until `stop()`."""

    def __init__(
        self,
        registry: ProcessRegistry,
        kind: str,
        *,
        errors: LastError,
        lag: Callable[[], int | None] = lambda: None,
        metrics_port: int | None = None,
        interval_s: float = HEARTBEAT_S,
    ) -> None:
        self._registry = registry
        self._kind = kind
        self._errors = errors
        self._lag = lag
        self._metrics_port = metrics_port
        self._interval_s = interval_s
        self._pid = os.getpid()
        self._host = socket.gethostname()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memstream-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(self._interval_s + 5.0)
        with contextlib.suppress(InfrastructureError):  # it expires by itself
            self._registry.remove(self._host, self._pid)

    def beat(self) -> None:
        """Write the report now."""
        last = self._errors.last
        report = ProcessReport(
            kind=self._kind,
            pid=self._pid,
            host=self._host,
            seen_at=datetime.now(UTC),
            metrics_port=self._metrics_port,
            lag=self._lag(),
            last_error=last[0] if last else "",
            last_error_at=datetime.fromtimestamp(last[1], UTC) if last else None,
        )
        self._registry.write(report, HEARTBEAT_TTL_S)

    def _run(self) -> None:
        failing = False
        while not self._stopping.is_set():
            try:
                self.beat()
                failing = False
            except InfrastructureError as exc:
                if not failing:  # once per outage, not every beat
                    log.warning("the heartbeat for `memstream status` failed: %s", exc)
                failing = True
            self._stopping.wait(self._interval_s)
