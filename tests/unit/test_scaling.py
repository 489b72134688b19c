"""The scaling simulation places tenants as Kafka does and measures the spread it claims."""

from __future__ import annotations

import numpy as np
import pytest
from aiokafka.partitioner import DefaultPartitioner

from memstream.streams.wire import partition_of
from memstream_bench.scaling import placements, simulate, tenant_sizes


def test_a_tenant_lands_on_the_partition_kafkas_partitioner_gives_it() -> None:
    partitioner = DefaultPartitioner()
    partitions = list(range(24))
    for tenant in ["acme", "globex", "tenant-0", "tenant-999999", "ünïcode"]:
        expected = partitioner(tenant.encode("utf-8"), partitions, partitions)
        assert partition_of(tenant, 24) == expected


def test_equal_tenants_spread_almost_evenly_and_shares_add_up() -> None:
    sizes = np.full(20_000, 10)
    spread = simulate(sizes, placements(20_000, 64), 64, 8)
    assert spread.total_memories == 200_000
    assert 1.0 <= spread.hottest_shard_vs_ideal < 1.05
    assert spread.hottest_partition_vs_ideal < 1.2
    assert spread.hottest_shard_share == pytest.approx(spread.hottest_shard_vs_ideal / 8, abs=1e-3)


def test_one_huge_tenant_makes_its_shard_the_hottest() -> None:
    sizes = np.full(1_000, 10)
    sizes[123] = 100_000  # ten times all the others together
    where = placements(1_000, 16)
    spread = simulate(sizes, where, 16, 4)
    assert spread.largest_tenant_share == pytest.approx(100_000 / 109_990, rel=1e-4)
    assert spread.hottest_shard_share >= spread.largest_tenant_share


def test_skewed_sizes_are_heavy_tailed_and_bounded() -> None:
    sizes = tenant_sizes(100_000)
    assert sizes.min() >= 10 and sizes.max() <= 10_000
    assert np.median(sizes) < sizes.mean()  # a long tail of large tenants


def test_shards_must_divide_the_partitions() -> None:
    with pytest.raises(ValueError, match="do not divide"):
        simulate(np.ones(10, dtype=np.int64), placements(10, 10), 10, 4)
