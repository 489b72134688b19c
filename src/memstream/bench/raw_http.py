"""The raw baseline of `bench serve`'s writes: a bare FastAPI endpoint that sends to Kafka.

The issue's yardstick (issue 22, item 8): one FastAPI route under the same uvicorn (the same
event loop and HTTP parser) that takes each POST's JSON body, sends it to the memory topic
with an idempotent, acks=all producer and answers `{"status": "ok"}` once Kafka has it. No
keys, no validation of the record, no events: what is left between this and `memstream serve`
is memstream's own work.

Run as `python -m memstream.bench.raw_http PORT TOPIC` (the bench starts it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiokafka import AIOKafkaProducer
from fastapi import FastAPI

from memstream.config import Settings
from memstream.streams.kafka import KafkaConnection
from memstream.streams.wire import producer_config

__all__ = ["bare_app"]


def bare_app(kafka: KafkaConnection, topic: str) -> FastAPI:
    """`POST /v1/long-term-memory/`, which sends its body to `topic` and waits, and a health
    route."""
    producers: list[AIOKafkaProducer] = []  # made on the server's loop, at start-up

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        producer = AIOKafkaProducer(**producer_config(kafka, "aiokafka", {"linger_ms": 2}))
        await producer.start()
        producers.append(producer)
        try:
            yield
        finally:
            await producer.stop()

    app = FastAPI(lifespan=lifespan)

    @app.get("/v1/health")  # what the bench waits on, as on `memstream serve`
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/long-term-memory/")
    async def write(body: dict[str, Any]) -> dict[str, str]:
        await producers[0].send_and_wait(topic, json.dumps(body).encode(), key=b"raw")
        return {"status": "ok"}

    return app


def main() -> None:
    import uvicorn

    port, topic = sys.argv[1:3]
    # The brokers and their security come from the MEMSTREAM_* variables the bench passes on.
    kafka = KafkaConnection.from_settings(Settings.from_env())
    uvicorn.run(bare_app(kafka, topic), host="127.0.0.1", port=int(port), log_level="warning")


if __name__ == "__main__":
    main()
