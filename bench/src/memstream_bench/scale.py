"""`bench scale`: the sharded projection and the replicated log, each figure beside a baseline
measured in the same run, on a cluster of the bench's own (`OwnCluster`: 3 brokers, 3 Redis).

- the ratios of issue 23's targets (`scale_ratios`, in many short interleaved rounds): with
  one shard, the sharded code against today's one-Redis path (projection throughput,
  freshness p50, recall p99), and recall p99 routed to a tenant's shard of 3 against one Redis;
- projection throughput of 1 and 2 `memstream worker` processes over 3 shards;
- a rebuild over 3 shards by one `memstream replay` process and by one per shard
  (`scale_replay`);
- a reshard 1 → 2 under a stream of turns (`scale_faults.measure_reshard`), and the hook's
  p99 before, during and after a broker kill (`scale_faults.measure_broker_kill`).

`only="ratios"` runs the first part alone, on the same cluster: the figures a quiet re-run
needs, in a few minutes; `only="replay"` the replays alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import InvalidInputError, MemstreamError
from memstream.memory.embeddings import Embedder
from memstream.memory.events import memories_of
from memstream.operations import worker_process
from memstream.projections.connection import redis_client
from memstream.streams.admin import KafkaAdmin
from memstream.streams.replay import Progress as ReplayProgress
from memstream_bench.cluster import OwnCluster
from memstream_bench.corpus import turns
from memstream_bench.harness import BenchNamespace
from memstream_bench.replay import drawn_vectors
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.scale_faults import measure_broker_kill, measure_reshard, wait_applied
from memstream_bench.scale_ratios import RatioSizes, measure_ratios
from memstream_bench.scale_replay import measure_replays
from memstream_bench.stats import Progress

__all__ = ["ScaleSizes", "run_scale"]

# 6 partitions divide evenly over 1, 2 and 3 shards.
PARTITIONS = 6
SHARDS = 3
BROKERS = 3
# What `only` may name: every part, or the ratios alone, or the replays alone.
PARTS = ("all", "ratios", "replay")


@dataclasses.dataclass(frozen=True, slots=True)
class ScaleSizes:
    """How much each part does (`ratios`: each round's and how many rounds)."""

    ratios: RatioSizes = dataclasses.field(default_factory=RatioSizes)
    worker_turns: int = 300  # projected per worker count
    replay_turns: int = 3000  # in the log the replays rebuild
    replay_rounds: int = 3
    tenants: int = 60
    stream_rate: float = 10.0  # turns/s while the reshard runs
    kill_phase_s: float = 4.0  # turns before the kill and after the broker rejoined
    timeout_s: float = 300.0


def run_scale(
    settings: Settings, embedder: Embedder, sizes: ScaleSizes, *, only: str = "all"
) -> BenchResult:
    """Every part of the bench (`only="all"`), or the ratios alone (`only="ratios"`), or the
    replays alone (`only="replay"`)."""
    if only not in PARTS:
        raise InvalidInputError(
            f"bench scale --scale-only takes one of {', '.join(PARTS)}, not {only!r}"
        )
    started = time.monotonic()
    progress = Progress("scale")
    progress.say(f"starting a cluster of {BROKERS} brokers and {SHARDS} Redis of the bench's own")
    with OwnCluster(settings, brokers=BROKERS, shards=SHARDS) as cluster:
        urls = cluster.redis_urls
        base = dataclasses.replace(
            cluster.settings, partitions=PARTITIONS, max_memories_per_tenant=0
        )
        one_url = dataclasses.replace(base, redis_url=urls[0], redis_shards="")
        sharded_one = dataclasses.replace(base, redis_url=urls[0], redis_shards=urls[0])
        three = dataclasses.replace(base, redis_url=urls[0], redis_shards=",".join(urls))
        figures: dict[str, object] = {
            "brokers": BROKERS,
            "shards": SHARDS,
            "partitions": PARTITIONS,
            "only": only,
            "sizes": dataclasses.asdict(sizes),
        }
        comparisons: list[Comparison] = []
        notes: list[str] = []
        if only == "replay":
            _replay_part(three, embedder, sizes, progress, figures, comparisons)
        else:
            progress.say(
                f"{sizes.ratios.rounds} rounds: 1 shard sharded vs today's, "
                "1 of 3 shards vs one Redis"
            )
            ratios = measure_ratios(sharded_one, one_url, three, embedder, sizes.ratios, progress)
            figures |= ratios.figures
            comparisons += ratios.comparisons
            notes += ratios.notes
        if only == "all":
            _the_rest(
                cluster,
                base,
                sharded_one,
                three,
                embedder,
                sizes,
                progress,
                figures,
                comparisons,
                notes,
            )
    notes.append(
        f"{BROKERS} brokers and {SHARDS} Redis on one machine: shards and workers share its "
        "cores, so this shows the code's cost, not the capacity more machines add"
    )
    return BenchResult("scale", figures, comparisons, notes, time.monotonic() - started)


def _the_rest(
    cluster: OwnCluster,
    base: Settings,
    sharded_one: Settings,
    three: Settings,
    embedder: Embedder,
    sizes: ScaleSizes,
    progress: Progress,
    figures: dict[str, object],
    comparisons: list[Comparison],
    notes: list[str],
) -> None:
    """Workers over 3 shards, a reshard 1 -> 2 and a broker kill, added to the report."""
    progress.say("workers over 3 shards")
    workers = _workers(three, embedder, sizes, progress)
    figures["workers"] = workers
    comparisons.append(
        Comparison(
            "3 shards: 2 workers vs 1",
            workers["2"]["events_per_s"],
            workers["1"]["events_per_s"],
            "events/s",
            "1 worker, same shards",
            True,
        )
    )

    _replay_part(three, embedder, sizes, progress, figures, comparisons)

    progress.say("reshard 1 -> 2 under a stream of turns")
    moved = measure_reshard(
        sharded_one,
        cluster.redis_urls[:2],
        embedder,
        progress,
        rate=sizes.stream_rate,
        timeout_s=sizes.timeout_s,
    )
    figures["reshard"] = moved
    notes.append(
        f"reshard 1 -> 2 took {moved['elapsed_s']} s (warm-up {moved['warm_s']} s); a "
        f"moved tenant's recall was routed to its old shard up to "
        f"{moved['old_shard_window_s']} s after the switch (bound {moved['window_bound_s']} "
        f"s), {moved['recall_errors']} recall errors, {moved['lost']} lost, "
        f"{moved['doubled']} doubled"
    )

    progress.say("the hook while a broker is killed")
    kill = measure_broker_kill(
        cluster, base, embedder, progress, phase_s=sizes.kill_phase_s, timeout_s=sizes.timeout_s
    )
    figures["broker_kill"] = kill
    for phase in ("before", "during", "after"):
        comparisons.append(
            Comparison(
                f"hook p99 {phase} a broker kill",
                kill[phase]["hook_p99_ms"],
                kill[phase]["raw_enqueue_p99_ms"],
                "ms",
                "raw producer enqueue",
                False,
            )
        )
    notes.append(
        f"broker {kill['killed']} killed: new leaders after {kill['failover_s']} s, back in "
        f"every ISR after {kill['rejoined_s']} s; {kill['turns']} turns, "
        f"{kill['records']} records in the log"
    )


# -- workers over 3 shards ----------------------------------------------------------------------


def _workers(
    three: Settings, embedder: Embedder, sizes: ScaleSizes, progress: Progress
) -> dict[str, dict[str, float]]:
    out = {}
    for count in (1, 2):
        with BenchNamespace(three, f"workers{count}", embedder) as ns, _running(ns, count):
            events = turns(sizes.worker_turns, embedder.model_id, tenants=sizes.tenants)
            t0 = time.perf_counter()
            ns.publish(events)
            wait_applied(ns.deployment, events, sizes.timeout_s, progress)
            seconds = time.perf_counter() - t0
        out[str(count)] = {"events": len(events), "events_per_s": round(len(events) / seconds, 1)}
        progress.say(f"{count} worker(s): {out[str(count)]['events_per_s']} events/s")
    return out


def _replay_part(
    three: Settings,
    embedder: Embedder,
    sizes: ScaleSizes,
    progress: Progress,
    figures: dict[str, object],
    comparisons: list[Comparison],
) -> None:
    progress.say(f"replay over {SHARDS} shards: one process, then one per shard")
    replays = _replays(three, embedder, sizes, progress)
    figures["replay"] = replays
    by = replays["processes"]
    comparisons.append(
        Comparison(
            f"{SHARDS} shards: replay by {SHARDS} processes vs 1",
            by[str(SHARDS)]["events_per_s_replaying"],
            by["1"]["events_per_s_replaying"],
            "events/s",
            "1 `memstream replay` process, same log",
            True,
        )
    )


def _replays(
    three: Settings, embedder: Embedder, sizes: ScaleSizes, progress: Progress
) -> dict[str, Any]:
    """A log of `replay_turns` projected over 3 shards, then rebuilt by 1 and by 3 processes.

    The live generation the rebuilds reuse is built by an in-process replay whose embedder
    draws a vector for each text (`drawn_vectors`, under `embedder`'s model id): the rebuilds
    reuse stored vectors and never embed, so what the vectors mean does not matter, and a log
    of a million events is projected in minutes, not the embedder's hours."""
    events = turns(sizes.replay_turns, embedder.model_id, tenants=sizes.tenants)
    drawn = drawn_vectors(events, embedder.model_id, embedder.dims)
    with BenchNamespace(three, "replay", drawn) as ns:
        progress.say(f"writing {len(events)} turns to the log")
        ns.publish(events)
        progress.say("projecting them (replay --reembed of every shard, drawn vectors)")
        seconds = asyncio.run(_projected(ns.deployment, progress))
        progress.say(f"projected in {seconds:.1f}s ({len(events) / seconds:.0f} events/s)")
        held = _redis_memory(ns.settings.shard_urls)
        env = {**os.environ, **ns.settings.environ()}
        replays = measure_replays(env, SHARDS, sizes.replay_rounds, progress)
        peak = _redis_memory(ns.settings.shard_urls)
        return {
            **replays,
            "memories": sum(len(memories_of(event)) for event in events),
            "redis_used_mib": held["used_memory"],
            "redis_peak_mib": peak["used_memory_peak"],
        }


async def _projected(deployment: Deployment, progress: Progress) -> float:
    """Seconds to build every shard's live generation, the shards at once."""

    async def rebuild(shard: int) -> None:
        def tick(at: ReplayProgress) -> None:
            progress.tick(f"shard {shard} projected", at.done, at.total)

        async with deployment.replayer(shard) as replayer:
            await replayer.rebuild(swap=True, reembed=True, progress=tick)

    started = time.perf_counter()
    await asyncio.gather(*(rebuild(shard) for shard in range(SHARDS)))
    return time.perf_counter() - started


def _redis_memory(urls: Sequence[str]) -> dict[str, float]:
    """INFO memory's used and peak figures, in MiB, summed over the shards (the cluster is the
    bench's own: nothing else is in them)."""
    summed = {"used_memory": 0.0, "used_memory_peak": 0.0}
    for url in urls:
        client = redis_client(url)
        try:
            info = client.info("memory")
        finally:
            client.close()
        for name in summed:
            summed[name] += int(info[name]) / (1 << 20)
    return {name: round(value, 1) for name, value in summed.items()}


@contextlib.contextmanager
def _running(ns: BenchNamespace, count: int) -> Iterator[None]:
    """`count` worker processes on the namespace, each holding partitions once it returns."""
    with contextlib.ExitStack() as stack:
        for n in range(count):
            log = stack.enter_context(_log(f"{ns.settings.namespace}-{n}"))
            probe = turns(1, ns.deployment.embedding_model, tenants=1)[0]
            stack.enter_context(worker_process(ns.deployment, log, probe, loglevel="warning"))
        asyncio.run(_settled(ns, count, 120.0))
        yield


@contextlib.contextmanager
def _log(name: str) -> Iterator[Path]:
    path = Path(tempfile.gettempdir()) / f"{name}.log"
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


async def _settled(ns: BenchNamespace, members: int, timeout_s: float) -> None:
    """Wait until the worker group is stable with `members` members (partitions shared)."""
    group = ns.topics.worker_group
    async with KafkaAdmin(ns.kafka, f"watch group {group}") as admin:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            (response,) = await admin.call(
                f"describe group {group}", lambda client: client.describe_consumer_groups([group])
            )
            state, joined = response.groups[0][2], response.groups[0][5]
            if state == "Stable" and len(joined) == members:
                return
            await asyncio.sleep(0.2)
    raise MemstreamError(f"the {members} workers did not share the partitions in {timeout_s}s")
