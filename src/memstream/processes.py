"""Child processes that benches, tests and the composition root start and stop: a worker, a
server, a baseline service. One way to find a free loopback port, to wait until a process is
ready (or say why it is not, with the end of its log), and to stop it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from memstream.errors import StackError

__all__ = ["free_port", "project_root", "running", "stop"]


def project_root() -> Path:
    """The folder holding infra/: MEMSTREAM_HOME, or the nearest one above the working folder."""
    if home := os.environ.get("MEMSTREAM_HOME"):
        return Path(home).resolve()
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "infra" / "kafka" / "server.properties").is_file():
            return folder
    raise StackError(
        "cannot find memstream's infra/ folder above the working folder; run this from the "
        "project checkout or set MEMSTREAM_HOME to it"
    )


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stop(process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """SIGTERM, and SIGKILL if it has not exited within `timeout_s`."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def running(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    log: Path,
    ready: Callable[[], bool],
    what: str,
    timeout_s: float = 90.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """`command` running (output appended to `log`) once `ready()` holds; stopped after the
    block. StackError, with the end of the log, if it exits or is not ready in time."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            list(command), env=dict(env), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                raise StackError(f"{what} did not get ready:\n{tail}")
            time.sleep(0.05)
        yield process
    finally:
        stop(process)
