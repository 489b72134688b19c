"""The raw baselines of `bench serve`'s writes: bare FastAPI endpoints doing the same I/O.

The issue's yardstick (issue 22, item 8; issue 39: "doing the same I/O"): one FastAPI route
under the same uvicorn (the same event loop and HTTP parser) that takes each POST's JSON
body, asks Redis whether any of its ids was retired (one SMISMEMBER, as memstream's check of
tombstones), sends it to the memory topic with an idempotent, acks=all producer and answers
`{"status": "ok"}` once Kafka has it. No keys, no validation of the record, no events, no
sealing: what is left between this and `memstream serve` is memstream's own work.

The working-memory routes' baseline does a session write's I/O the least way: read the
session (one GET), send the messages it did not hold to Kafka and wait, write the session
whole (one SET with its TTL). No version, no merge of concurrent puts, no windows, no turns.
A store's session event (Redis Agent Memory's API) is the same I/O: its one message appended
to its session that way.

The search's baseline is the same in-process recall memstream's route runs (the query embedded,
both searches in one round trip, the reranker where configured) behind a plain FastAPI route in
uvicorn's thread pool, its hits answered as JSON with `json.dumps`: no key, no request model, no
filters, no count of the tenant's matches, no record model. What is left between it and
`memstream serve`'s search is memstream's own HTTP work; what is left between it and the
in-process recall is the HTTP stack's (uvicorn, FastAPI, the client).

Run as `python -m memstream_bench.raw_http PORT TOPIC PREFIX` (the bench starts it).
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiokafka import AIOKafkaProducer
from fastapi import FastAPI, Response

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.memory.model import RecalledMemory
from memstream.memory.ports import Recaller
from memstream.memory.tenancy import validate_tenant
from memstream.projections.connection import RedisConnection
from memstream.streams.kafka import KafkaConnection
from memstream.streams.wire import producer_config
from memstream_bench.raw_redis import RawSessions

__all__ = ["bare_app"]


_SESSION_TTL_S = 3600


def bare_app(
    kafka: KafkaConnection, topic: str, redis: RedisConnection, prefix: str, recaller: Recaller
) -> FastAPI:
    """`POST /v1/long-term-memory/`, which sends its body to `topic` and waits; a session's put
    and append (kept under `prefix`); a search of `?tenant=` by `recaller`; and a health
    route."""
    producers: list[AIOKafkaProducer] = []  # made on the server's loop, at start-up
    stores: list[RawSessions] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The server's own producer settings (streams.event_publisher: no linger), so that
        # both send the same produce requests.
        producer = AIOKafkaProducer(**producer_config(kafka, "aiokafka", {"linger_ms": 0}))
        await producer.start()
        producers.append(producer)
        stores.append(RawSessions(redis, prefix))
        try:
            yield
        finally:
            await producer.stop()
            await stores[0].close()

    async def stored(session_id: str) -> list[dict[str, Any]]:
        document = await stores[0].get(session_id)
        held: list[dict[str, Any]] = json.loads(document)["messages"] if document else []
        return held

    async def written(
        session_id: str, held: list[dict[str, Any]], messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        ids = {m.get("id") for m in held}
        new = [m for m in messages if m.get("id") not in ids]
        if new:
            await producers[0].send_and_wait(topic, json.dumps(new).encode(), key=b"raw")
        session = {"session_id": session_id, "messages": messages}
        await stores[0].put(session_id, json.dumps(session).encode(), _SESSION_TTL_S)
        return session

    app = FastAPI(lifespan=lifespan)

    @app.get("/v1/health")  # what the bench waits on, as on `memstream serve`
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/long-term-memory/")
    async def write(body: dict[str, Any]) -> dict[str, str]:
        # memstream's write I/O: is any id retired (one set lookup), then the send.
        ids = [record["id"] for record in body["memories"]]
        if any(await stores[0].retired(ids)):
            return {"status": "retired"}
        await producers[0].send_and_wait(topic, json.dumps(body).encode(), key=b"raw")
        return {"status": "ok"}

    @app.post("/v1/long-term-memory/search")
    def search(body: dict[str, Any], tenant: str) -> Response:
        hits = recaller.recall(validate_tenant(tenant), body["text"], k=10)
        found = {"memories": [_hit(h) for h in hits], "total": len(hits)}
        return Response(json.dumps(found), media_type="application/json")

    @app.put("/v1/working-memory/{session_id}")
    async def put(session_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return await written(session_id, await stored(session_id), body["messages"])

    @app.post("/v1/working-memory/{session_id}/messages")
    async def append(session_id: str, body: dict[str, Any]) -> dict[str, Any]:
        held = await stored(session_id)
        return await written(session_id, held, [*held, *body["messages"]])

    @app.post("/v1/stores/{store_id}/session-memory/events", status_code=201)
    async def event(store_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """A store's session event: appended to its session as one message."""
        session_id = body["sessionId"]
        held = await stored(session_id)
        text = " ".join(part["text"] for part in body["content"])
        message = {"id": uuid.uuid4().hex, "role": body["role"].lower(), "content": text}
        await written(session_id, held, [*held, message])
        return {"event": {**body, "eventId": message["id"]}}

    return app


def _hit(hit: RecalledMemory) -> dict[str, Any]:
    memory = hit.memory
    return {
        "id": memory.id,
        "text": memory.content,
        "session_id": memory.thread,
        "created_at": memory.timestamp.isoformat(),
        "memory_type": memory.memory_type.value,
        "importance": memory.importance,
        "score": hit.score,
    }


def main() -> None:
    import uvicorn

    port, topic, prefix = sys.argv[1:4]
    # The brokers, Redis and their security come from the MEMSTREAM_* variables the bench
    # passes on.
    settings = Settings.from_env()
    app = bare_app(
        KafkaConnection.from_settings(settings),
        topic,
        RedisConnection.from_settings(settings),
        prefix,
        Deployment(settings).recaller(),
    )
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
