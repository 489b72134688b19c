"""A simulation of how tenants spread over Kafka partitions and Redis shards (docs/scaling.md).

memstream keys the memory topic by tenant, so a tenant's events sit on one partition (Kafka's
murmur2 partitioner, used by every memstream producer), and one worker owns a partition at a
time. Past one Redis the projection is sharded *by partition*: shard = partition mod shards,
so a worker writes only to the shards of its partitions, recall finds a tenant's shard from
its id alone (murmur2 → partition → shard, no directory), and a replay runs per shard over
that shard's partitions.

The simulation draws `tenants` tenant sizes from a heavy-tailed (Pareto) distribution, places
each tenant by the real partitioner, and reports how even the load is: the hottest
partition's and the hottest shard's share of all memories against the ideal 1/n, and the
largest single tenant (a tenant is never split). `python -m memstream_bench.scaling` prints
the table of docs/scaling.md.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass

import numpy as np

from memstream.streams.wire import partition_of

__all__ = ["Spread", "simulate"]


@dataclass(frozen=True, slots=True)
class Spread:
    """How one layout shares the memories out."""

    tenants: int
    partitions: int
    shards: int
    total_memories: int
    hottest_partition_share: float
    hottest_partition_vs_ideal: float  # share * partitions: 1.0 is perfectly even
    hottest_shard_share: float
    hottest_shard_vs_ideal: float  # share * shards
    largest_tenant_share: float
    shard_cv: float  # coefficient of variation of the shards' memories


def tenant_sizes(tenants: int, *, alpha: float = 1.2, seed: int = 7) -> np.ndarray:
    """Memories per tenant: Pareto with shape `alpha` (most tenants small, a few huge),
    at least 1, capped at memstream's default bound of 10,000 per tenant."""
    rng = np.random.default_rng(seed)
    sizes = np.floor((rng.pareto(alpha, tenants) + 1) * 10)
    return np.minimum(sizes, 10_000).astype(np.int64)


def placements(tenants: int, partitions: int) -> np.ndarray:
    """The partition of each tenant `tenant-{i}`."""
    return np.fromiter(
        (partition_of(f"tenant-{i}", partitions) for i in range(tenants)),
        dtype=np.int64,
        count=tenants,
    )


def simulate(sizes: np.ndarray, partition: np.ndarray, partitions: int, shards: int) -> Spread:
    """The spread of memories when tenant i (of size sizes[i]) sits on partition[i]."""
    if partitions % shards:
        raise ValueError(f"{partitions} partitions do not divide evenly into {shards} shards")
    per_partition = np.bincount(partition, weights=sizes, minlength=partitions)
    per_shard = np.bincount(np.arange(partitions) % shards, weights=per_partition)
    total = float(sizes.sum())
    hottest_partition = float(per_partition.max()) / total
    hottest_shard = float(per_shard.max()) / total
    return Spread(
        tenants=len(sizes),
        partitions=partitions,
        shards=shards,
        total_memories=int(total),
        hottest_partition_share=round(hottest_partition, 5),
        hottest_partition_vs_ideal=round(hottest_partition * partitions, 3),
        hottest_shard_share=round(hottest_shard, 5),
        hottest_shard_vs_ideal=round(hottest_shard * shards, 3),
        largest_tenant_share=round(float(sizes.max()) / total, 6),
        shard_cv=round(float(per_shard.std() / per_shard.mean()), 4),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1_000_000)
    parser.add_argument("--alpha", type=float, default=1.2)
    args = parser.parse_args()
    sizes = tenant_sizes(args.tenants, alpha=args.alpha)
    rows = []
    for partitions in (64, 256, 1024):
        where = placements(args.tenants, partitions)
        for shards in (1, 4, 16, 64):
            if shards <= partitions:
                rows.append(asdict(simulate(sizes, where, partitions, shards)))
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
