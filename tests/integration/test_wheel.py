"""A Python user's first contact: the built wheel installed in a fresh virtualenv outside the
checkout, with a fresh HOME, runs its own stack (`memstream up --worker`, and a cluster with
`--brokers 3 --shards 3`), imports, recalls and stops (`down`).

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
import zipfile
from pathlib import Path

import pytest

from memstream.binaries import cache_dir

from .clusters import cluster_ports
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


@pytest.mark.parametrize(
    ("brokers", "shards", "state_dir"),
    [
        pytest.param(1, 1, False, id="one-broker"),
        pytest.param(1, 1, True, id="one-broker-state-dir"),
        pytest.param(3, 3, False, id="cluster", marks=pytest.mark.cluster),
        pytest.param(3, 3, True, id="cluster-state-dir", marks=pytest.mark.cluster),
    ],
)
def test_an_installed_wheel_runs_its_own_stack_in_a_fresh_home(
    installed: Path, tmp_path: Path, brokers: int, shards: int, state_dir: bool
) -> None:
    """A new user's machine: HOME an empty folder (no ~/.local), no XDG_* settings, the
    command run outside any checkout, the state in the user's state folder or, with
    MEMSTREAM_STATE_DIR, in a folder of the user's choosing."""
    bin_ = installed / "bin"
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "elsewhere"
    work.mkdir()
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
        MEMSTREAM_PARTITIONS=str(shards),
        **cluster_ports(brokers, shards),
    )
    state = home / ".local" / "state" / "memstream" / ".run"
    if state_dir:
        state = work / "state"
        env["MEMSTREAM_STATE_DIR"] = str(state)
    memstream = str(bin_ / "memstream")

    located = _run(
        [str(bin_ / "python"), "-c", "import memstream; print(memstream.__file__)"], env, work
    )
    assert Path(located.strip()).is_relative_to(installed)
    version = _run([memstream, "--version"], env, work)
    assert version.startswith("memstream 0.")

    up = [memstream, "up", "--worker"]
    if brokers > 1:
        up += ["--brokers", str(brokers), "--shards", str(shards)]
    try:
        started = _run(up, env, work)
        first = "kafka" if brokers == 1 else "kafka-1"
        assert f"{first}: ready" in started and "worker: ready" in started, started
        assert (state / f"{first}.pid").is_file()
        user_state = home / ".local" / "state" / "memstream"
        assert user_state.stat().st_mode & 0o077 == 0  # the user's alone, as XDG asks
        if state_dir:  # the state where the user put it, none in the user's folder
            assert not (user_state / ".run").exists()
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
    assert stopped.returncode == 0 and f"{first}: stopped" in stopped.stdout, stopped.stderr


def test_the_wheel_holds_no_bench_and_its_bench_command_says_what_to_install(
    installed: Path, tmp_path: Path
) -> None:
    """The benches are a distribution of their own (memstream-bench, bench/): none of their code
    is in memstream's wheel, and without them `memstream bench` says how to get them."""
    (wheel,) = installed.parent.glob("memstream-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "memstream/cli/main.py" in names
    bench_code = [
        name
        for name in names
        if name.startswith("memstream_bench/")
        or {"bench", "bench.py", "baselines.py"} & set(name.split("/"))
    ]
    assert bench_code == []
    env = {"HOME": str(tmp_path), "PATH": f"{installed / 'bin'}:{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [str(installed / "bin" / "memstream"), "bench", "recall", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("memstream: `memstream bench` ") and "memstream[bench]" in line, line


def test_the_installed_wheel_carries_the_console_its_pages_stylesheet_and_script(
    installed: Path, tmp_path: Path
) -> None:
    """The console works from the wheel alone: every page's template, the stylesheet and the
    live page's script are package data, read from the installed files, not the checkout."""
    script = (
        "from importlib.resources import files\n"
        "import memstream.server.console as console\n"
        "folder = files('memstream.server').joinpath('console_templates')\n"
        "names = sorted(p.name for p in folder.iterdir())\n"
        "for name in names:\n"
        "    console._templates.get_template(name)\n"
        "print(console.__file__, len(console._CSS), len(console._LIVE_JS), *names)\n"
    )
    env = {"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    where, css, js, *names = _run(
        [str(installed / "bin" / "python"), "-c", script], env, tmp_path
    ).split()
    assert Path(where).is_relative_to(installed)
    assert int(css) > 0 and int(js) > 0
    pages = {"sign_in", "explorer", "memory", "time", "turns", "live", "edit", "forget", "ops"}
    assert {f"{page}.html" for page in pages} <= set(names), names
