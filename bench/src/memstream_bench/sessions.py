"""`bench serve`'s working-memory part, over the same server and key as the rest of the run:

- put: a session grown one exchange a request and put whole each time (what
  agent-memory-client's append does after reading it), each new exchange recorded as a turn
  (acknowledged by Kafka) before the answer;
- append: one exchange a request through memstream's atomic append;
- memory_prompt for the same queries, interleaved, with a session (its 20 messages first)
  and long-term only: what reading the session adds to a prompt;
- puts and appends from 16 concurrent clients, each on a session of its own (`session_rates`),
  and session events of Redis Agent Memory's store API (one message an event, the tenant's
  store), to set against the bare endpoint's writes a second, as the long-term writes are.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from memstream_bench.http_load import Load, concurrently
from memstream_bench.stats import Latency

__all__ = ["SessionRates", "SessionTimes", "measure_sessions", "session_rates"]

_WARMUP = 10
_SESSION_MESSAGES = 20


@dataclass(frozen=True, slots=True)
class SessionTimes:
    put: Latency
    append: Latency
    prompt_with_session: Latency
    prompt_long_term: Latency


def _exchange(texts: Sequence[str], i: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": texts[(3 * i) % len(texts)][:300], "id": f"u{i}"},
        {"role": "assistant", "content": texts[(3 * i + 1) % len(texts)][:300], "id": f"a{i}"},
    ]


def measure_sessions(http: httpx.Client, texts: Sequence[str], requests: int) -> SessionTimes:
    run = uuid.uuid4().hex[:8]
    put_times: list[float] = []
    messages: list[dict[str, str]] = []
    for i in range(requests + _WARMUP):
        messages = [*messages, *_exchange(texts, i)][-_SESSION_MESSAGES:]
        t0 = time.perf_counter()
        http.put(f"/v1/working-memory/put-{run}", json={"messages": messages}).raise_for_status()
        if i >= _WARMUP:
            put_times.append(time.perf_counter() - t0)
    append_times: list[float] = []
    for i in range(requests + _WARMUP):
        body = {"messages": _exchange(texts, i)}
        t0 = time.perf_counter()
        http.post(f"/v1/working-memory/append-{run}/messages", json=body).raise_for_status()
        if i >= _WARMUP:
            append_times.append(time.perf_counter() - t0)
    with_session: list[float] = []
    long_term: list[float] = []
    session = {"session_id": f"put-{run}"}
    for i in range(requests + _WARMUP):
        query = texts[(7 * i) % len(texts)][:200]
        for first in (i % 2 == 0, i % 2 == 1):  # alternate which goes first
            asked: dict[str, object] = {"query": query, **({"session": session} if first else {})}
            t0 = time.perf_counter()
            http.post("/v1/memory/prompt", json=asked).raise_for_status()
            if i >= _WARMUP:
                (with_session if first else long_term).append(time.perf_counter() - t0)
    return SessionTimes(
        put=Latency.of_seconds(put_times),
        append=Latency.of_seconds(append_times),
        prompt_with_session=Latency.of_seconds(with_session),
        prompt_long_term=Latency.of_seconds(long_term),
    )


@dataclass(frozen=True, slots=True)
class SessionRates:
    put: Load
    append: Load
    event: Load

    @classmethod
    def total(cls, parts: Sequence[SessionRates]) -> SessionRates:
        return cls(
            Load.total([p.put for p in parts]),
            Load.total([p.append for p in parts]),
            Load.total([p.event for p in parts]),
        )


async def session_rates(
    url: str, key: str, store: str, texts: Sequence[str], requests: int, clients: int
) -> SessionRates:
    """`requests` puts, then `requests` appends, then `requests` session events of `store`,
    `clients` at a time, each client on a session of its own: a put sends the client's
    session grown by one exchange (its last 20 messages, whole), an append one exchange, an
    event one message."""
    run = uuid.uuid4().hex[:8]
    sessions: dict[int, list[dict[str, str]]] = {}

    def put(http: httpx.AsyncClient, client: int, i: int) -> Awaitable[httpx.Response]:
        grown = [*sessions.get(client, []), *_exchange(texts, i)][-_SESSION_MESSAGES:]
        sessions[client] = grown
        return http.put(f"/v1/working-memory/put-{run}-{client}", json={"messages": grown})

    def append(http: httpx.AsyncClient, client: int, i: int) -> Awaitable[httpx.Response]:
        body = {"messages": _exchange(texts, i)}
        return http.post(f"/v1/working-memory/append-{run}-{client}/messages", json=body)

    def event(http: httpx.AsyncClient, client: int, i: int) -> Awaitable[httpx.Response]:
        (said, _) = _exchange(texts, i)
        body = {
            "sessionId": f"event-{run}-{client}",
            "actorId": "bench",
            "role": "USER",
            "content": [{"text": said["content"]}],
            "createdAt": datetime.now(UTC).isoformat(),
        }
        return http.post(f"/v1/stores/{store}/session-memory/events", json=body)

    return SessionRates(
        put=await concurrently(url, key, requests, clients, put),
        append=await concurrently(url, key, requests, clients, append),
        event=await concurrently(url, key, requests, clients, event),
    )
