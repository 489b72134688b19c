"""`memstream tail`: print monitoring events (DeadLettered, Evicted, Forgotten, Consolidated)
as they come, one JSON object a line."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from memstream.deployment import Deployment
from memstream.errors import KafkaUnavailableError

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tail = commands.add_parser("tail", help="print monitoring events as they come")
    tail.add_argument("--from-beginning", action="store_true", help="start at the oldest kept")
    tail.add_argument("--max", type=int, default=0, help="stop after this many events")
    tail.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="stop after this many seconds (exit 1 if --max events did not come by then)",
    )
    tail.set_defaults(run=_run)


async def _tail(deployment: Deployment, args: argparse.Namespace) -> int:
    kafka = deployment.kafka
    topic = deployment.topics.monitoring
    consumer = AIOKafkaConsumer(
        topic,
        **kafka.aiokafka(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
    )
    deadline = time.monotonic() + args.timeout if args.timeout > 0 else None
    printed = 0
    try:
        await consumer.start()
        while deadline is None or time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                for record in records:
                    print((record.value or b"").decode("utf-8", errors="replace"), flush=True)
                    printed += 1
                    if printed == args.max:
                        return 0
    except KafkaError as exc:
        raise KafkaUnavailableError(
            f"could not read {topic} from Kafka at {kafka.where}: {await kafka.explain(exc)}; "
            "check the broker (`memstream status`) and MEMSTREAM_KAFKA_BOOTSTRAP"
        ) from exc
    finally:
        await consumer.stop()
    print(f"tail: {printed} events before the timeout", file=sys.stderr)
    return 0 if args.max == 0 else 1


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    return asyncio.run(_tail(deployment, args))
