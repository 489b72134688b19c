"""Requests from concurrent HTTP clients, as `bench serve` sends its writes: how many a second,
and each one's latency; and whether a server answers its health check (benches wait on it).

`clients` coroutines share one httpx client (one keep-alive connection each) and take request
numbers from one queue until it is empty; every answer must be a success.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx

from memstream_bench.stats import Latency

__all__ = ["Load", "Request", "concurrently", "healthy"]

# (the shared client, the client's number, the request's number) -> the answer
Request = Callable[[httpx.AsyncClient, int, int], Awaitable[httpx.Response]]


@dataclass(frozen=True, slots=True)
class Load:
    requests: int
    seconds: float
    latencies: tuple[float, ...]

    @classmethod
    def total(cls, parts: Sequence[Load]) -> Load:
        """Loads run one after another, as one."""
        return cls(
            sum(p.requests for p in parts),
            sum(p.seconds for p in parts),
            tuple(latency for p in parts for latency in p.latencies),
        )

    @property
    def per_s(self) -> float:
        return self.requests / self.seconds

    @property
    def latency(self) -> Latency:
        return Latency.of_seconds(self.latencies)


async def concurrently(url: str, key: str, requests: int, clients: int, request: Request) -> Load:
    """`requests` requests made by `request`, `clients` at a time, with the tenant `key`."""
    latencies: list[float] = []
    queue = list(range(requests))
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits) as http:

        async def client(number: int) -> None:
            while queue:
                i = queue.pop()
                t0 = time.perf_counter()
                (await request(http, number, i)).raise_for_status()
                latencies.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(client(n) for n in range(clients)))
        return Load(requests, time.perf_counter() - t0, tuple(latencies))


def healthy(url: str) -> bool:
    """Whether the memstream server at `url` answers its health check with 200 within 1 s."""
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"{url}/v1/health", timeout=1).status_code == 200
    return False
