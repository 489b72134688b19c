"""A service `up` started counts as stopped once it has exited, whoever its parent is."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from memstream.cli.stack import LocalStack
from memstream.config import Settings

# Starts a child that exits at once and never reaps it (nor lets subprocess do so), so the
# child stays a zombie of a parent that is not the test: as a killed broker stays one under
# the test session or user fixture that started it.
_NEGLECTFUL_PARENT = (
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os._exit(0)\n"
    "print(pid, flush=True)\n"
    "sys.stdin.read()\n"
)


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2]


def test_a_zombie_of_another_parent_is_stopped_not_running(tmp_path: Path) -> None:
    settings = Settings.from_env({"MEMSTREAM_STATE_DIR": str(tmp_path / "state")})
    stack = LocalStack(settings, root=tmp_path)
    (tmp_path / "state").mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-c", _NEGLECTFUL_PARENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        zombie = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        while _state(zombie) != "Z":
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        (tmp_path / "state" / "kafka-1.pid").write_text(str(zombie))
        assert stack.pid("kafka-1") is None
        assert not (tmp_path / "state" / "kafka-1.pid").exists()
        # The parent itself still runs: a live process of another parent is running.
        (tmp_path / "state" / "kafka-1.pid").write_text(str(parent.pid))
        assert stack.pid("kafka-1") == parent.pid
    finally:
        parent.communicate("")
