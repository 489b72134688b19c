"""How long Redis takes to restart with a projection of N memories, and what the append-only
file's size has to do with it (docs/operations.md).

`python -m memstream_bench.restart [--memories 100000]` starts a Redis of its own (the local
stack's binary, configured as `memstream up`'s redis.conf: AOF, fsync every second) on a free port,
seeds N memories through the real writer (random vectors, as `bench recall`), and times a
restart after SIGKILL — until it answers, and until its search index is whole — in three
states: the projection alone; after a second namespace of N memories was written and its keys
deleted without a rewrite (the file still holds them); and after BGREWRITEAOF.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from memstream.binaries import cache_dir, redis_home
from memstream.config import Settings
from memstream.processes import quiet_port
from memstream_bench.harness import BenchNamespace
from memstream_bench.raw_redis import RedisProbe, wait_until
from memstream_bench.recall import seed_memories as seed_random  # the recall bench's seeding
from memstream_bench.stats import Progress, process_cpu_s

__all__ = ["main"]


class _Redis:
    def __init__(self, folder: Path, home: Path) -> None:
        self.port = quiet_port()  # restarted on it: below the ephemeral range
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._folder = folder
        self._home = home
        self._process: subprocess.Popen[bytes] | None = None
        self.probe = RedisProbe(self.url)

    def start(self) -> None:
        command = [
            str(self._home / "bin" / "redis-server"),
            "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self._folder),
            "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
            "--loadmodule", str(self._home / "lib" / "redisearch.so"),
            "--loadmodule", str(self._home / "lib" / "rejson.so"),
        ]  # fmt: skip
        log = (self._folder / "redis.log").open("ab")
        self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()

    def restart(self, index: str) -> dict[str, float]:
        """SIGKILL, start again; seconds until it answers PING and until `index` is whole."""
        self.kill()
        started = time.monotonic()
        self.start()
        answered = wait_until(self.probe.answers) - started
        indexed = wait_until(lambda: self.probe.indexed(index)) - started
        return {
            "answers_s": round(answered, 2),
            "index_whole_s": round(indexed, 2),
            # CPU seconds Redis spent getting there: on a shared machine, steadier than wall.
            "cpu_s": round(self._cpu_s(), 2),
        }

    def _cpu_s(self) -> float:
        assert self._process is not None
        return process_cpu_s(self._process.pid)

    def aof_bytes(self) -> int:
        return sum(f.stat().st_size for f in (self._folder / "appendonlydir").iterdir())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument(
        "--dropped",
        type=int,
        default=None,
        help="memories of the namespace deleted without a rewrite (default: --memories)",
    )
    parser.add_argument(
        "--redis-home",
        type=Path,
        default=None,
        help="the Redis Stack server folder (bin/, lib/); by default the one `memstream up` "
        "runs (fetched into the cache folder if missing)",
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="memstream-restart-"))
    home = args.redis_home.resolve() if args.redis_home else redis_home(cache_dir())
    server = _Redis(folder, home)
    server.start()
    wait_until(server.probe.answers)
    settings = dataclasses.replace(Settings.from_env(), redis_url=server.url)
    progress = Progress("restart")
    results: dict[str, object] = {"memories": args.memories, "dropped": args.dropped}
    try:
        with BenchNamespace(settings, "restart") as ns:
            seed_random(ns, 0, args.memories, args.tenants, 384, progress)
            server.probe.rewrite()  # what Redis's own policy leaves, at best
            index = ns.keys.alias
            results["projection_only"] = {"aof_bytes": server.aof_bytes(), **server.restart(index)}
            with BenchNamespace(settings, "dropped") as other:
                seed_random(other, 0, args.dropped or args.memories, args.tenants, 384, progress)
                server.probe.delete_without_rewrite(other.keys.namespace)
            results["after_drop_without_rewrite"] = {
                "aof_bytes": server.aof_bytes(),
                **server.restart(index),
            }
            server.probe.rewrite()
            results["after_rewrite"] = {"aof_bytes": server.aof_bytes(), **server.restart(index)}
    finally:
        server.kill()
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
