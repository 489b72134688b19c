"""Unit tests see no local stack: where nothing names Kafka or Redis, Settings read the
topology `memstream up` recorded under the project root (memstream.topology), and a
developer's running cluster must not change what a unit test reads."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_local_stack(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("MEMSTREAM_HOME", str(tmp_path_factory.mktemp("home")))
