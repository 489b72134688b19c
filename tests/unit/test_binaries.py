"""Where the local stack's downloads and state go, what a missing Java says, and that a download
is kept only when it matches its pinned sha256 (memstream.binaries, memstream.processes)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from memstream import binaries
from memstream.errors import StackError
from memstream.processes import project_root

CHECKOUT = Path(__file__).resolve().parents[2]


def test_the_package_ships_the_stack_files_and_pins() -> None:
    for name in ("kafka/server.properties", "kafka/log4j2.yaml", "redis/redis.conf"):
        assert binaries.stack_file(name).is_file(), name
    jars = binaries.stack_file("kafka-jars.txt").read_text().split()
    assert any("/kafka_2.13/" in entry for entry in jars)


def test_in_a_checkout_downloads_and_state_stay_in_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMSTREAM_CACHE_DIR", "MEMSTREAM_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(CHECKOUT / "docs")
    assert binaries.cache_dir() == CHECKOUT / ".cache"
    assert project_root() == CHECKOUT


def test_outside_a_checkout_they_go_to_the_users_folders(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("MEMSTREAM_CACHE_DIR", "MEMSTREAM_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert binaries.cache_dir() == tmp_path / ".cache" / "memstream"
    assert project_root() == tmp_path / ".local" / "state" / "memstream"
    monkeypatch.setenv("MEMSTREAM_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("MEMSTREAM_HOME", str(tmp_path / "h"))
    assert binaries.cache_dir() == tmp_path / "c"
    assert project_root() == tmp_path / "h"


def test_without_java_it_says_how_to_get_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(
        StackError, match=r"Java 17 or later.*apt-get install openjdk-17.*JAVA_HOME"
    ):
        binaries.java()


def _client(body: bytes) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(lambda _: httpx.Response(200, content=body)))


def test_a_download_is_kept_only_when_its_sha256_matches(tmp_path: Path) -> None:
    body = b"the jar"
    target = tmp_path / "a.jar"
    with pytest.raises(StackError, match="does not have the sha256"):
        binaries._download(_client(body), "https://x/a.jar", "0" * 64, target)
    assert list(tmp_path.iterdir()) == []
    binaries._download(_client(body), "https://x/a.jar", hashlib.sha256(body).hexdigest(), target)
    assert target.read_bytes() == body


def _answering(*answers: int | Exception) -> tuple[httpx.Client, list[int]]:
    """A client whose requests get `answers` in turn (a status, or an error raised), and the
    list of statuses it answered."""
    given: list[int] = []
    left = list(answers)

    def answer(request: httpx.Request) -> httpx.Response:
        now = left.pop(0)
        if isinstance(now, Exception):
            raise now
        given.append(now)
        return httpx.Response(now, content=b"the jar" if now == 200 else b"")

    return httpx.Client(transport=httpx.MockTransport(answer)), given


def test_a_transient_failure_is_tried_again_and_a_missing_file_is_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(binaries, "_BACKOFF_S", 0.0)
    pinned = hashlib.sha256(b"the jar").hexdigest()
    alert = httpx.ConnectError("[SSL: TLSV1_ALERT_DECODE_ERROR] tlsv1 alert decode error")
    client, given = _answering(alert, 503, 200)
    binaries._download(client, "https://x/a.jar", pinned, tmp_path / "a.jar")
    assert (tmp_path / "a.jar").read_bytes() == b"the jar" and given == [503, 200]

    client, given = _answering(404, 200)
    with pytest.raises(StackError, match=r"could not download https://x/b\.jar .*404"):
        binaries._download(client, "https://x/b.jar", pinned, tmp_path / "b.jar")
    assert given == [404] and not (tmp_path / "b.jar").exists()

    client, _ = _answering(*[alert] * binaries._ATTEMPTS)
    with pytest.raises(StackError, match=r"alert decode error.*run this again"):
        binaries._download(client, "https://x/c.jar", pinned, tmp_path / "c.jar")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jar"]  # no partial file left
