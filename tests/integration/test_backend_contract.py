"""The Redis projection passes the backend contract: on the suite's Redis (a namespace of its
own per test, dropped after it), and sharded over two Redis of this module's own (a tenant on
shard partition(tenant) mod 2, as the producers place it). No Kafka: events are applied through
the writer, as the worker applies them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import ClassVar

import pytest

from memstream import Settings
from memstream.backends import ProjectionBackend
from memstream.projections.backend import RedisProjection
from memstream.streams.wire import partition_of

from ..contract.backend_contract import BackendContract
from .helpers import OwnRedis, wait_until

pytestmark = pytest.mark.integration


class TestRedisBackend(BackendContract):
    __test__ = True

    @pytest.fixture(autouse=True)
    def _on(self, settings: Settings) -> None:
        self._settings = settings

    def make_backend(self, namespace: str) -> ProjectionBackend:
        settings = dataclasses.replace(
            self._settings, namespace=namespace, max_memories_per_tenant=self.bound
        )
        return RedisProjection(settings, self.partition_of)


@pytest.fixture(scope="module")
def shard_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    folder = tmp_path_factory.mktemp("contract-shards")
    redises = [OwnRedis(folder) for _ in range(2)]
    try:
        for n, redis in enumerate(redises):
            redis.start(folder / f"shard-{n}")
        for redis in redises:
            wait_until(redis.answers, f"shard Redis on port {redis.port}")
        yield [redis.url for redis in redises]
    finally:
        for redis in redises:
            redis.stop()


class TestShardedRedisBackend(BackendContract):
    __test__ = True
    partitions: ClassVar[int] = 4

    @pytest.fixture(autouse=True)
    def _on(self, settings: Settings, shard_urls: list[str]) -> None:
        self._settings = dataclasses.replace(settings, redis_shards=",".join(shard_urls))

    def partition_of(self, tenant: str) -> int:
        return partition_of(tenant, self.partitions)

    def make_backend(self, namespace: str) -> ProjectionBackend:
        settings = dataclasses.replace(
            self._settings, namespace=namespace, max_memories_per_tenant=self.bound
        )
        return RedisProjection(settings, self.partition_of)
