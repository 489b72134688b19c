"""After a large delete, memstream rewrites Redis's append-only file, so restarts stay short."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstream.projections.connection import COMPACT_AFTER, compact

from .helpers import OwnRedis, wait_until

pytestmark = pytest.mark.integration


def test_a_large_delete_rewrites_the_append_only_file_and_a_small_one_does_not(
    tmp_path: Path,
) -> None:
    server = OwnRedis(tmp_path)
    with server.running(tmp_path / "aof", "--appendonly", "yes"):
        client = server.client()

        def rewrites() -> int:
            return int(client.info("persistence")["aof_rewrites"])

        def idle() -> bool:
            info = client.info("persistence")
            return not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]

        wait_until(idle, "the first rewrite Redis makes when AOF starts")
        before = rewrites()
        assert not compact(client, COMPACT_AFTER - 1)
        assert compact(client, COMPACT_AFTER)
        wait_until(lambda: idle() and rewrites() == before + 1, "the rewrite to finish")


def test_without_an_append_only_file_nothing_is_rewritten(tmp_path: Path) -> None:
    server = OwnRedis(tmp_path)
    with server.running(tmp_path / "none"):
        assert not compact(server.client(), COMPACT_AFTER * 10)
