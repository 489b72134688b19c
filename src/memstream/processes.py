"""Child processes that benches, tests and the composition root start and stop: a worker, a
server, a baseline service. One way to find a free loopback port, to wait until a process is
ready (or say why it is not, with the end of its log), and to stop it."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from memstream.errors import StackError

__all__ = ["checkout_root", "free_port", "port_free", "project_root", "running", "stop"]


def checkout_root() -> Path | None:
    """The memstream checkout holding the working folder, if it is in one."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "infra" / "install.sh").is_file() and (folder / "src" / "memstream").is_dir():
            return folder
    return None


def project_root() -> Path:
    """The folder the local stack's state folder (MEMSTREAM_STATE_DIR, `.run/`) is relative to:
    MEMSTREAM_HOME, else the checkout above the working folder, else the user's
    (`$XDG_STATE_HOME/memstream`, by default `~/.local/state/memstream`) for an installed
    package."""
    if home := os.environ.get("MEMSTREAM_HOME"):
        return Path(home).expanduser().resolve()
    if (checkout := checkout_root()) is not None:
        return checkout
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "memstream"


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# Below Linux's ephemeral range (32768-60999): a port there is never handed to an outgoing
# connection, so a service killed and started again finds it still free.
_QUIET_PORTS = range(20000, 32768)
# Not the `random` module's shared state, which a test may seed: processes started alike
# would pick alike.
_PICK = random.SystemRandom()


def quiet_port(span: int = 0) -> int:
    """A free loopback port below the ephemeral range, with `span` more ports above it still
    under the range (a cluster's siblings); for a service that is killed and started again on
    the same port, which an outgoing connection could take meanwhile if it were ephemeral."""
    while True:
        port = _PICK.randrange(_QUIET_PORTS.start, _QUIET_PORTS.stop - span)
        if port_free(port):
            return port


def port_free(port: int) -> bool:
    """Whether a loopback listener could bind `port` now (a cluster's sibling ports)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


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
