"""Schemathesis's negative cases against the run's servers, from several clients at once, while
the faults go on: requests built to break the served OpenAPI document (wrong types, missing
fields, bad ids, out-of-range values), some with a key that is no key. None may get a 500 or
any 5xx but the documented ones: a 503 that says it may be retried (Kafka or Redis out, which
the faults make happen) and the 504 of a write told to wait.

Each client is a process of its own (`python -m memstream_bench.chaos.negative`): Hypothesis
does not run in several threads of one Python 3.11 process (its source inspection is not
thread-safe there). A client writes each 5xx it was not allowed as a JSON line on its stdout,
and its count of requests last, when told to stop (SIGTERM). Its key comes in its environment,
never on its command line. The clients write as a tenant of their own, so a generated request
that happens to be valid (a forget of everything, say) never touches the tenants whose memory
the run checks.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as seeded
from schemathesis import Case, GenerationMode, Response
from schemathesis.core.result import Ok
from schemathesis.schemas import APIOperation

__all__ = ["NEGATIVE_TENANT", "NegativeClients"]

NEGATIVE_TENANT = "chaos-fuzz"
_KEY = "MEMSTREAM_CHAOS_KEY"
_EXAMPLES = 5  # a round's cases per operation
_TIMEOUT_S = 30.0


class NegativeClients:
    """`clients` processes sending rounds of negative cases over every operation until
    stopped; `stop` returns what they found and how many requests they sent."""

    def __init__(self, servers: Sequence[str], key: str, run_seed: int, logs: Path) -> None:
        self._servers, self._key, self._seed, self._logs = servers, key, run_seed, logs
        self._processes: list[subprocess.Popen[str]] = []
        self.sent = 0

    def start(self, clients: int = 2) -> None:
        for n in range(clients):
            command = [
                sys.executable,
                "-m",
                "memstream_bench.chaos.negative",
                self._servers[n % len(self._servers)],
                str(self._seed * 100 + n),
            ]
            with (self._logs / f"negative-{n}.log").open("w") as log:
                self._processes.append(
                    subprocess.Popen(
                        command,
                        env={**os.environ, _KEY: self._key},
                        stdout=subprocess.PIPE,
                        stderr=log,
                        text=True,
                    )
                )

    def stop(self) -> list[str]:
        for process in self._processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        found = []
        for process in self._processes:
            out, _ = process.communicate()
            for line in out.splitlines():
                said = json.loads(line)
                if "sent" in said:
                    self.sent += said["sent"]
                else:
                    found.append(said["found"])
            if process.returncode != 0:
                found.append(f"a negative-case client exited {process.returncode}")
        self._processes.clear()
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("server")
    parser.add_argument("seed", type=int)
    args = parser.parse_args()
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    sent = _send_rounds(args.server, os.environ[_KEY], args.seed, stopping)
    print(json.dumps({"sent": sent}), flush=True)


def _send_rounds(server: str, key: str, seed: int, stopping: threading.Event) -> int:
    schema = schemathesis.openapi.from_url(f"{server}/openapi.json")
    operations = [
        op
        for op in (r.ok() for r in schema.get_all_operations() if isinstance(r, Ok))
        if any((op.body, op.query, op.path_parameters))
    ]
    keys = [{"Authorization": f"Bearer {key}"}, {"Authorization": "Bearer msk_0_not-a-key"}]
    sent = 0
    for round_ in itertools.count():
        for n, operation in enumerate(operations):
            if stopping.is_set():
                return sent
            headers = keys[(round_ + n) % 10 == 0]  # now and then a key that is no key
            sent += _round(operation, server, headers, seed * 10_000 + round_ * 100 + n, stopping)
    return sent


def _round(
    operation: APIOperation[Any, Any, Any, Any],
    server: str,
    headers: dict[str, str],
    at: int,
    stopping: threading.Event,
) -> int:
    """A few negative cases of `operation`, drawn from seed `at`; how many were sent."""
    sent = 0

    @seeded(at)
    @settings(
        max_examples=_EXAMPLES,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))
    def exchange(case: Case[Any]) -> None:
        nonlocal sent
        if stopping.is_set():
            return
        try:
            response = case.call(base_url=server, headers=headers, timeout=_TIMEOUT_S)
        except OSError:
            return  # a server down: the faults' doing; the availability figures say so
        except Exception as exc:  # noqa: BLE001 - a case the client cannot send
            print(f"not sent: {exc!r}", file=sys.stderr, flush=True)
            return
        sent += 1
        if response.status_code >= 500 and not _allowed(case, response):
            found = (
                f"{case.method} {case.formatted_path} (a negative case) got "
                f"{response.status_code}: {response.text[:300]}"
            )
            print(json.dumps({"found": found}), flush=True)

    exchange()
    return sent


def _allowed(case: Case[Any], response: Response) -> bool:
    status = response.status_code
    if status == 504:
        return str((case.query or {}).get("wait")).lower() == "true"
    if status == 503:
        try:
            body = response.json()
        except ValueError:
            return False
        return isinstance(body, dict) and body.get("retryable") is True
    return False


if __name__ == "__main__":
    main()
