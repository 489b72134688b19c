"""A Python user's first contact: the built wheel installed in a fresh virtualenv outside the
checkout runs its own stack (`memstream up --worker`), imports, recalls and stops (`down`).

Lean on purpose: the wheel is built without build isolation, and the virtualenv reads its
dependencies from the test's own environment (a .pth line) instead of downloading them again;
Kafka's jars and Redis come from the suite's download cache. The stack runs on free ports, in a
namespace and state folder of its own, so it never meets the suite's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import pytest

from memstream.binaries import cache_dir
from memstream.processes import free_port

from .helpers import DEADLINE_S

pytestmark = pytest.mark.integration

CHECKOUT = Path(__file__).resolve().parents[2]
TURN = {
    "tenant": "wheel",
    "thread": "first-contact",
    "query": "Our staging cluster runs in Frankfurt.",
    "answer": "Noted: staging in Frankfurt.",
}


def _run(command: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=DEADLINE_S * 4
    )
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv, outside the checkout, with the wheel built from it installed."""
    folder = tmp_path_factory.mktemp("wheel")
    assert CHECKOUT not in folder.parents
    # Built from a copy: setuptools writes build/ and egg-info folders where it builds.
    source = folder / "source"
    shutil.copytree(
        CHECKOUT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(CHECKOUT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run(
        [
            *pip,
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(folder),
            str(source),
        ],
        dict(os.environ),
        folder,
    )
    (wheel,) = folder.glob("memstream-*.whl")
    venv = folder / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], dict(os.environ), folder)
    python = venv / "bin" / "python"
    site = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        dict(os.environ),
        folder,
    ).strip()
    # The dependencies, read from this environment: a .pth line adds a folder to sys.path but
    # runs none of its .pth files, so the checkout's editable install stays out of sight.
    (Path(site) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        [*pip, "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
        {**os.environ},
        folder,
    )
    return venv


def test_an_installed_wheel_runs_its_own_stack(installed: Path, tmp_path: Path) -> None:
    bin_ = installed / "bin"
    home = tmp_path / "home"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MEMSTREAM_", "PYTHON", "VIRTUAL_ENV", "XDG_"))
    }
    env.update(
        HOME=str(home),
        PATH=f"{bin_}:{env.get('PATH', '')}",
        MEMSTREAM_CACHE_DIR=str(cache_dir()),  # the suite's downloads: no second fetch
        MEMSTREAM_NAMESPACE=f"wheel-{uuid.uuid4().hex[:8]}",
        MEMSTREAM_KAFKA_PORT=str(free_port()),
        MEMSTREAM_KAFKA_CONTROLLER_PORT=str(free_port()),
        MEMSTREAM_REDIS_PORT=str(free_port()),
        MEMSTREAM_PARTITIONS="1",
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    memstream = str(bin_ / "memstream")

    located = _run(
        [str(bin_ / "python"), "-c", "import memstream; print(memstream.__file__)"], env, work
    )
    assert Path(located.strip()).is_relative_to(installed)
    version = _run([memstream, "--version"], env, work)
    assert version.startswith("memstream 0.")

    try:
        started = _run([memstream, "up", "--worker"], env, work)
        assert "kafka: ready" in started and "worker: ready" in started
        # No checkout above the working folder: the state goes to the user's state folder.
        assert (home / ".local" / "state" / "memstream" / ".run" / "kafka.pid").is_file()
        turns = work / "turns.jsonl"
        turns.write_text(json.dumps(TURN) + "\n")
        _run([memstream, "import", str(turns), "--wait"], env, work)
        found = json.loads(
            _run(
                [memstream, "recall", "--tenant", "wheel", "--json", "where is staging?"], env, work
            )
        )
        assert any("Frankfurt" in hit["content"] for hit in found), found
    finally:
        stopped = subprocess.run(
            [memstream, "down"], env=env, cwd=work, capture_output=True, text=True, check=False
        )
    assert stopped.returncode == 0 and "kafka: stopped" in stopped.stdout, stopped.stderr
