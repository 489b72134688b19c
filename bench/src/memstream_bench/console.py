"""`bench console`: how long the console's pages take at 100k memories, against the API calls
underneath them, in the same run.

The projection is seeded with `size` memories over `tenants` tenants (random unit vectors under
the configured embedder's model id, written straight to Redis as `bench recall` seeds them: the
pages' cost does not depend on what the vectors mean), and one `memstream serve` answers both
sides. One tenant's key signs a console session in; then, interleaved, each page and the API
call it is built on, over one keep-alive connection each:

- the explorer's search (`GET /console?q=...`, 50 hits rendered) against `POST
  /v1/long-term-memory/search` with the same text and limit;
- the explorer's listing (`GET /console`, newest first) against the same search without text;
- a memory's page (`GET /console/memories/{id}`: the memory, and its history from the log,
  which for a seeded memory is empty) against `GET /v1/long-term-memory/{id}` and its
  `/history`.

Figures: each side's p50 and p95 (ms), and the page's p95 over the API's. The issue's target:
every page within 200 ms p95 at 100k memories.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from memstream.config import Settings
from memstream.memory.embeddings import Embedder
from memstream.memory.tenancy import validate_tenant
from memstream.server.parts import api_keys
from memstream_bench.corpus import conversation_texts
from memstream_bench.harness import BenchNamespace
from memstream_bench.recall import seed_memories
from memstream_bench.report import BenchResult, Comparison
from memstream_bench.serve import serving
from memstream_bench.stats import Latency, Progress

__all__ = ["run_console"]

TARGET = "p95 ≤ 200 ms"
_WARM = 10


def run_console(
    settings: Settings,
    embedder: Embedder,
    *,
    size: int = 100_000,
    tenants: int = 1000,
    requests: int = 200,
) -> BenchResult:
    started = time.monotonic()
    progress = Progress("console")
    with BenchNamespace(settings, "console", embedder) as ns:
        progress.say(f"seeding {size} memories over {tenants} tenants")
        seed_memories(ns, 0, size, tenants, embedder.dims, progress, model=embedder.model_id)
        tenant = validate_tenant("tenant-7")
        key, _ = api_keys(ns.deployment).create(tenant)
        memory_ids = [m.id for m in ns.deployment.reader().memories(tenant)][:50]
        texts = [t[:200] for t in conversation_texts()]
        with (
            serving(ns.settings, "memstream", "serve", "--port", "{port}") as url,
            httpx.Client(base_url=url, timeout=30) as page,
            httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30
            ) as api,
        ):
            signed = page.post("/console/sign-in", data={"key": key})
            if signed.status_code != 303:
                raise RuntimeError(f"the console refused the bench's key: {signed.status_code}")

            def search_page(i: int) -> httpx.Response:
                return page.get("/console", params={"q": texts[i % len(texts)]})

            def search_api(i: int) -> httpx.Response:
                body = {"text": texts[i % len(texts)], "limit": 50}
                return api.post("/v1/long-term-memory/search", json=body)

            def listing_page(i: int) -> httpx.Response:
                return page.get("/console")

            def listing_api(i: int) -> httpx.Response:
                return api.post("/v1/long-term-memory/search", json={"limit": 50})

            def memory_page(i: int) -> httpx.Response:
                return page.get(f"/console/memories/{memory_ids[i % len(memory_ids)]}")

            def memory_api(i: int) -> httpx.Response:
                memory_id = memory_ids[i % len(memory_ids)]
                # A seeded memory has no history in the log: 404, after the same read.
                history = api.get(f"/v1/long-term-memory/{memory_id}/history")
                if history.status_code not in (200, 404):
                    return history
                return api.get(f"/v1/long-term-memory/{memory_id}")

            pairs = {
                "search": (search_page, search_api),
                "listing": (listing_page, listing_api),
                "memory": (memory_page, memory_api),
            }
            figures: dict[str, dict[str, float]] = {}
            comparisons = []
            for name, (ours, underneath) in pairs.items():
                progress.say(f"{requests} {name} pages and API calls, interleaved")
                mine, theirs = _interleaved(ours, underneath, requests)
                figures[name] = {
                    "page_p50_ms": mine.p50_ms,
                    "page_p95_ms": mine.p95_ms,
                    "api_p50_ms": theirs.p50_ms,
                    "api_p95_ms": theirs.p95_ms,
                }
                comparisons.append(
                    Comparison(
                        f"{name} page p95 @{_label(size)}",
                        mine.p95_ms,
                        theirs.p95_ms,
                        "ms",
                        "the API call(s) underneath",
                        False,
                        TARGET,
                    )
                )
    return BenchResult(
        "console",
        {"memories": size, "tenants": tenants, "requests": requests, "pages": figures},
        comparisons,
        notes=(
            "memory page: history from the log is empty for a seeded memory (it was written "
            "straight to Redis), so the log read is the lineage's cached answer",
        ),
        seconds=time.monotonic() - started,
    )


def _label(size: int) -> str:
    return f"{size // 1000}k" if size >= 1000 and size % 1000 == 0 else str(size)


def _interleaved(
    ours: Callable[[int], httpx.Response], theirs: Callable[[int], httpx.Response], n: int
) -> tuple[Latency, Latency]:
    """Each side `n` times (after `_WARM` untimed), taking turns, which goes first
    alternating."""
    mine: list[float] = []
    underneath: list[float] = []
    for i in range(n + _WARM):
        for first in (i % 2 == 0, i % 2 == 1):
            t0 = time.perf_counter()
            response = ours(i) if first else theirs(i)
            elapsed = time.perf_counter() - t0
            if response.status_code != 200:
                raise RuntimeError(f"{response.request.url}: {response.status_code}")
            if i >= _WARM:
                (mine if first else underneath).append(elapsed)
    return Latency.of_seconds(mine), Latency.of_seconds(underneath)
