"""`memstream bench SUB`: measure memstream beside raw baselines; write JSON, Markdown and PNG.

Subcommands: hook, recall, freshness, throughput, replay, load, locomo, extract, store, serve,
console, lineage, echo, asof, scale and all (every one of them with its defaults). Each bench
runs in a fresh namespace on the configured stack (scale on a cluster of its own), with a worker
process of its own where it needs one, and drops everything it created when it ends. Progress
goes to stderr; `--json` prints the report's JSON on stdout. What each figure means:
docs/benchmarks.md.

memstream's own command line finds `register` through the `memstream.commands` entry point
this distribution declares (bench/pyproject.toml).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import InvalidInputError
from memstream.memory.embeddings import Embedder
from memstream.memory.ranking.fusion import RRF_K
from memstream.projections.recall import CANDIDATES
from memstream_bench.corpus import DEFAULT_LOCOMO
from memstream_bench.report import BenchResult, RunReport, default_results_dir

__all__ = ["register"]

Bench = Callable[[argparse.Namespace, Settings, Embedder], BenchResult]


def _hook(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.hook import run_hook

    return run_hook(settings, embedder, turns=args.hook_turns)


def _recall(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.recall import run_recall

    sizes = tuple(int(s) for s in args.sizes.split(","))
    return run_recall(settings, embedder, sizes=sizes, tenants=args.tenants, queries=args.queries)


def _freshness(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.freshness import run_freshness

    return run_freshness(
        settings,
        embedder,
        light_count=args.light,
        high_seconds=args.high_seconds,
        rate=args.rate,
        rounds=args.freshness_rounds,
    )


def _extract(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.extract import run_extract

    return run_extract(
        settings,
        embedder,
        count=args.extract_turns,
        probes=args.extract_probes,
        stub_latency_s=args.extract_stub,
        data=args.extract_data,
    )


def _extract_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--extract-turns", type=int, default=24, help="LoCoMo turns extracted")
    parser.add_argument(
        "--extract-data", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo file of the turns"
    )
    parser.add_argument(
        "--extract-probes", type=int, default=12, help="turns timed for freshness, each phase"
    )
    parser.add_argument(
        "--extract-stub",
        type=float,
        default=None,
        metavar="S",
        help="a stub model answering one fact after S seconds, no CPU meanwhile (what "
        "extraction costs memstream itself), instead of the configured or local model",
    )


def _throughput(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.throughput import run_throughput

    return run_throughput(settings, embedder, count=args.turns, rounds=args.throughput_rounds)


def _replay(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.replay import run_replay

    return run_replay(settings, embedder, count=args.events)


def _load(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.load import run_load

    return run_load(
        settings, embedder, threads=args.threads, seconds=args.seconds, turns=args.thread_turns
    )


def _encryption(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.encryption import run_encryption

    return run_encryption(
        settings, embedder, turns=args.enc_turns, events=args.enc_events, rounds=args.enc_rounds
    )


def _encryption_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--enc-turns", type=int, default=2000, help="hook turns per side")
    parser.add_argument("--enc-events", type=int, default=1000, help="log events per side")
    parser.add_argument("--enc-rounds", type=int, default=2, help="alternating rounds")


def _locomo(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.locomo import run_locomo

    return run_locomo(
        settings,
        embedder,
        data=args.data,
        style=args.content,
        rrf_k=args.rrf_k,
        candidates=args.candidates,
        conversations=args.conversations,
        questions=args.questions,
        sweep=_sweep(args.sweep),
        extracting=args.extract,
        extract_turns=args.extract_per_conversation,
    )


def _console(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.console import run_console

    return run_console(
        settings,
        embedder,
        size=args.console_memories,
        tenants=args.console_tenants,
        requests=args.console_requests,
    )


def _serve(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.serve import run_serve

    return run_serve(
        settings,
        embedder,
        queries=args.serve_queries,
        writes=args.serve_writes,
        sequential=args.serve_sequential,
        memories=args.serve_memories,
        rounds=args.serve_rounds,
    )


def _asof(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.asof import run_asof

    return run_asof(settings, embedder, events=args.asof_events, memories=args.asof_memories)


def _asof_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--asof-events", type=int, default=100_000, help="events in the log")
    parser.add_argument("--asof-memories", type=int, default=1000, help="the tenant's bound")


def _scale(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.scale import ScaleSizes, run_scale
    from memstream_bench.scale_ratios import RatioSizes

    sizes = ScaleSizes(
        ratios=RatioSizes(
            rounds=args.scale_rounds,
            turns=args.scale_turns,
            fresh=args.scale_fresh,
            memories=args.scale_memories,
            tenants=args.scale_tenants,
            queries=args.scale_queries,
        ),
        worker_turns=args.scale_worker_turns,
        replay_turns=args.scale_replay_turns,
        replay_rounds=args.scale_replay_rounds,
        tenants=args.scale_tenants,
        stream_rate=args.scale_rate,
        kill_phase_s=args.scale_phase_s,
    )
    return run_scale(settings, embedder, sizes, only=args.scale_only)


def _scale_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scale-only",
        choices=("all", "ratios", "replay"),
        default="all",
        help="ratios: only the one-shard and routed comparisons (no workers, reshard, kill); "
        "replay: only the replays by 1 process and by 1 per shard",
    )
    parser.add_argument(
        "--scale-rounds", type=int, default=10, help="interleaved rounds of the ratios"
    )
    parser.add_argument(
        "--scale-turns", type=int, default=64, help="projected per side in each round"
    )
    parser.add_argument(
        "--scale-fresh", type=int, default=12, help="freshness turns per side in each round"
    )
    parser.add_argument("--scale-memories", type=int, default=3000, help="recall's memories")
    parser.add_argument("--scale-tenants", type=int, default=60)
    parser.add_argument(
        "--scale-queries", type=int, default=2000, help="per way of asking in each round"
    )
    parser.add_argument(
        "--scale-worker-turns", type=int, default=300, help="projected per worker count"
    )
    parser.add_argument(
        "--scale-replay-turns", type=int, default=3000, help="in the log the replays rebuild"
    )
    parser.add_argument(
        "--scale-replay-rounds", type=int, default=3, help="of 1 replay process vs 1 per shard"
    )
    parser.add_argument("--scale-rate", type=float, default=10.0, help="turns/s in the reshard")
    parser.add_argument(
        "--scale-phase-s", type=float, default=4.0, help="turns before and after a broker kill"
    )


def _chaos(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.chaos.run import ChaosSizes, run_chaos

    seed = args.seed if args.seed is not None else secrets.randbelow(1_000_000)
    return run_chaos(settings, embedder, ChaosSizes(seed=seed, minutes=args.minutes))


def _chaos_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seed", type=int, default=None, help="the fault plan's seed (default: drawn, printed)"
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="load and faults")


def _sweep(specs: list[str]) -> dict[str, list[float]]:
    """`--sweep vector_weight=2,3,4` options as {field: values}."""
    sweep: dict[str, list[float]] = {}
    for spec in specs:
        name, _, values = spec.partition("=")
        try:
            sweep[name.strip()] = [float(v) for v in values.split(",")]
        except ValueError:
            raise InvalidInputError(
                f"--sweep {spec!r}: write FIELD=V1,V2,... with numbers, e.g. vector_weight=2,4"
            ) from None
    return sweep


_BENCHES: dict[str, tuple[Bench, str, Callable[[argparse.ArgumentParser], None]]] = {}


def _store(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.store import run_store

    return run_store(settings, embedder, items=args.store_items)


def _echo(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.echo import run_echo

    return run_echo(
        settings, embedder, tenants=args.echo_tenants, turns=args.echo_turns,
        share=args.echo_share, bound=args.echo_bound,
    )  # fmt: skip


def _echo_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--echo-tenants", type=int, default=3)
    parser.add_argument("--echo-turns", type=int, default=300, help="questions per tenant")
    parser.add_argument("--echo-share", type=float, default=0.6, help="answers that restate")
    parser.add_argument("--echo-bound", type=int, default=36, help="memories per tenant")


def _lineage(args: argparse.Namespace, settings: Settings, embedder: Embedder) -> BenchResult:
    from memstream_bench.lineage import run_lineage

    return run_lineage(settings, embedder, turns=args.lineage_turns, events=args.lineage_events)


def _lineage_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lineage-turns", type=int, default=10_000, help="hook turns per side")
    parser.add_argument("--lineage-events", type=int, default=4000, help="turns applied per side")


def _store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store-items", type=int, default=300)


def _hook_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hook-turns", type=int, default=2000)


def _recall_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="10000,100000", help="memories, comma-separated")
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=1000, help="per size")


def _freshness_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--light", type=int, default=30, help="turns sent one at a time")
    parser.add_argument("--high-seconds", type=float, default=6.0, help="length of high load")
    parser.add_argument(
        "--rate", type=float, default=None, help="high load turns/s (default: 60%% of embedder)"
    )
    parser.add_argument(
        "--freshness-rounds", type=int, default=5, help="of memstream then raw, both loads"
    )


def _throughput_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--turns", type=int, default=600, help="published in each round")
    parser.add_argument(
        "--throughput-rounds", type=int, default=5, help="of memstream, raw and the embedder"
    )


def _replay_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", type=int, default=1500)


def _load_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=8, help="concurrent agent threads")
    parser.add_argument("--seconds", type=float, default=20.0, help="load phase at most")
    parser.add_argument("--thread-turns", type=int, default=300, help="turns per thread at most")


def _locomo_options(parser: argparse.ArgumentParser) -> None:
    from memstream_bench.locomo import CONTENT_STYLES, DEFAULT_STYLE

    parser.add_argument("--data", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--content", choices=sorted(CONTENT_STYLES), default=DEFAULT_STYLE)
    parser.add_argument("--rrf-k", type=int, default=RRF_K)
    parser.add_argument("--candidates", type=int, default=CANDIDATES)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    parser.add_argument("--questions", type=int, default=None, help="only the first N")
    parser.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="FIELD=V1,V2",
        help="also measure recall with a RecallTuning field at each value (repeatable)",
    )
    parser.add_argument(
        "--extract",
        action="store_true",
        help="extract facts with the chat model (MEMSTREAM_CHAT_*; else the local test model) "
        "and measure recall with them against the turns alone",
    )
    parser.add_argument(
        "--extract-per-conversation",
        type=int,
        default=None,
        help="with --extract: the first N turns of each conversation only (default all; the "
        "local test model takes seconds a turn)",
    )


def _console_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--console-memories", type=int, default=100_000)
    parser.add_argument("--console-tenants", type=int, default=1000, help="memories spread over")
    parser.add_argument("--console-requests", type=int, default=200, help="a page, timed")


def _serve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--serve-queries", type=int, default=300)
    parser.add_argument("--serve-writes", type=int, default=800, help="from 16 clients")
    parser.add_argument("--serve-sequential", type=int, default=100, help="timed one by one")
    parser.add_argument("--serve-memories", type=int, default=1000, help="the tenant's memories")
    parser.add_argument(
        "--serve-rounds", type=int, default=3, help="rounds of concurrent writes, ours and bare"
    )


_BENCHES.update(
    {
        "hook": (_hook, "time after_agent adds to a turn vs the agent without it", _hook_options),
        "recall": (
            _recall,
            "recall latency at 10k/100k memories vs raw FT.SEARCH",
            _recall_options,
        ),
        "freshness": (_freshness, "publish-to-recallable latency vs raw", _freshness_options),
        "throughput": (_throughput, "turns/s one worker projects vs raw", _throughput_options),
        "replay": (
            _replay,
            "events/s of replay vs consume + writes",
            _replay_options,
        ),
        "load": (_load, "agent threads recording under load; 0 lost, 0 doubled", _load_options),
        "encryption": (
            _encryption,
            "hook p99, projection and replay with sealed content vs plaintext",
            _encryption_options,
        ),
        "locomo": (_locomo, "LoCoMo evidence recall@k vs BM25 and vector", _locomo_options),
        "extract": (
            _extract,
            "turns/s extracted and projected vs the chat model alone; freshness while extracting",
            _extract_options,
        ),
        "echo": (
            _echo,
            "restatements stored and facts kept, echo control on vs off",
            _echo_options,
        ),
        "lineage": (
            _lineage,
            "hook p99, projection and Redis bytes per memory with lineage vs without",
            _lineage_options,
        ),
        "store": (_store, "LangGraph store put/get/search vs raw Kafka and Redis", _store_options),
        "serve": (
            _serve,
            "HTTP search vs in-process recall; writes/s of 16 clients vs raw Kafka",
            _serve_options,
        ),
        "console": (
            _console,
            "the console's pages at 100k memories vs the API calls underneath",
            _console_options,
        ),
        "asof": (
            _asof,
            "recall --as-of (first, repeated) and history on a long log vs reading it raw",
            _asof_options,
        ),
        "chaos": (
            _chaos,
            "random faults under load on a cluster of its own; nothing lost, doubled or leaked",
            _chaos_options,
        ),
        "scale": (
            _scale,
            "shards and a 3-broker cluster of its own: routing, workers, reshard, broker kill",
            _scale_options,
        ),
    }
)


# Not in `bench all`: extraction runs a chat model (minutes of it on a CPU), and chaos a cluster
# of its own for minutes, which the other benches' before/after comparisons should not wait on.
_ON_ITS_OWN = frozenset({"extract", "chaos"})


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--out", type=Path, default=None, help="results folder (default bench-results/<time>/)"
    )
    common.add_argument("--json", action="store_true", help="print the JSON report on stdout")
    bench = commands.add_parser("bench", help="measure speed and quality against raw baselines")
    subs = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    for name, (_, help_text, options) in _BENCHES.items():
        parser = subs.add_parser(name, help=help_text, parents=[common])
        options(parser)
        parser.set_defaults(run=_run, benches=[name])
    every = subs.add_parser("all", help="every bench with its defaults", parents=[common])
    for _, _, options in _BENCHES.values():
        options(every)
    every.set_defaults(run=_run, benches=[name for name in _BENCHES if name not in _ON_ITS_OWN])


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """Stopped by SIGTERM (a timeout, `kill`), a bench unwinds as from Ctrl-C: the clusters,
    processes and namespaces it started are stopped and dropped, not left running. Only a
    process's main thread can handle signals (a caller running the command in a thread keeps
    its own handling); the previous handler is back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    settings = deployment.settings
    started = datetime.now(UTC)
    embedder = deployment.embedder
    results = []
    with _sigterm_unwinds():
        for name in args.benches:
            print(f"[bench] {name}", file=sys.stderr, flush=True)
            results.append(_BENCHES[name][0](args, settings, embedder))
    report = RunReport(started, results)
    folder = args.out or default_results_dir(started)
    paths = report.write(folder)
    print(f"[bench] wrote {', '.join(str(p) for p in paths)}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.as_json(), indent=2, ensure_ascii=False))
    else:
        print(report.markdown())
    failures = [f"{r.name}: {f}" for r in results for f in r.failures]
    for failure in failures:
        print(f"[bench] FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0
