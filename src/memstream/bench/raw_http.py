"""The raw baseline of `bench serve`'s writes: the least an HTTP service can do per write.

A bare ASGI app under the same uvicorn (with the same event loop and HTTP parser) that reads
each POST body, parses the JSON, sends the body to the memory topic with an idempotent,
acks=all producer and answers `{"status": "ok"}` once Kafka has it. No keys, no validation,
no events: what is left between this and `memstream serve` is memstream's own work.

Run as `python -m memstream.bench.raw_http PORT TOPIC` (the bench starts it).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from aiokafka import AIOKafkaProducer

from memstream.config import Settings
from memstream.streams.kafka import KafkaConnection
from memstream.streams.wire import producer_config

__all__ = ["RawWrites"]


class RawWrites:
    def __init__(self, kafka: KafkaConnection, topic: str) -> None:
        self._kafka = kafka
        self._topic = topic
        self._producer: AIOKafkaProducer | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self._producer = AIOKafkaProducer(
                        **producer_config(self._kafka, "aiokafka", {"linger_ms": 2})
                    )
                    await self._producer.start()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    if self._producer is not None:
                        await self._producer.stop()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if body:
            parsed = json.loads(body)
            assert self._producer is not None
            await self._producer.send_and_wait(self._topic, json.dumps(parsed).encode(), key=b"raw")
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"status":"ok"}'})


def main() -> None:
    import uvicorn

    port, topic = sys.argv[1:3]
    # The brokers and their security come from the MEMSTREAM_* variables the bench passes on.
    kafka = KafkaConnection.from_settings(Settings.from_env())
    uvicorn.run(RawWrites(kafka, topic), host="127.0.0.1", port=int(port), log_level="warning")


if __name__ == "__main__":
    main()
