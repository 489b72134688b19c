"""The `memstream` command in tests: run in this process (its parser, code, output and exit
status, without a second of interpreter start-up and imports each time), or as a process of its
own where the process is what is tested (test_cli.py, `keys`, `serve`, `up`, `status`)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from memstream.cli.main import main

__all__ = ["memstream", "memstream_process"]


def memstream(
    env: dict[str, str], *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`memstream ARGS` with `env`'s settings, run here: what it printed and its exit status,
    as `memstream_process` would give them."""
    out, err = io.StringIO(), io.StringIO()
    # On a thread of its own: the command runs its own event loop (asyncio.run), which an async
    # test's running loop would refuse.
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        _stdin(io.StringIO(input or "")),
        ThreadPoolExecutor(1) as thread,
    ):
        status = thread.submit(_exit_status, args, env).result()
    return subprocess.CompletedProcess(["memstream", *args], status, out.getvalue(), err.getvalue())


def memstream_process(
    env: dict[str, str], *args: str, input: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`memstream ARGS` as a process of its own, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "memstream", *args],
        input=input,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _exit_status(args: tuple[str, ...], env: dict[str, str]) -> int:
    try:
        return main(args, environ=env)
    except SystemExit as exit_:  # argparse's usage errors, --help
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except Exception:  # noqa: BLE001 - uncaught: the interpreter prints it and exits 1
        traceback.print_exc()
        return 1


@contextlib.contextmanager
def _stdin(replacement: io.StringIO) -> Iterator[None]:
    saved, sys.stdin = sys.stdin, replacement
    try:
        yield
    finally:
        sys.stdin = saved
