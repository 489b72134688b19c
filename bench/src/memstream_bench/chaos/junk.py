"""Junk in the memory topic while the faults go on, as a foreign producer writes it: raw bytes,
truncated JSON, a known event with a field of the wrong type, an unknown event type, a version
from the future, an event under another tenant's key, and a 5 MB event.

Each delivered message must come back as a dead letter with its code, no workload tenant's
write may be dead-lettered, and no worker may stop (the run checks its processes). The 5 MB
event is more than a Kafka message may hold (1 MiB by default): the producer is refused it,
and it never reaches a worker; it is sent to show that too.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from memstream.deployment import Deployment
from memstream.memory.tenancy import tenant_key
from memstream.streams.dead_letters import read_dead_letters
from memstream.streams.wire import producer_config

__all__ = ["JUNK_TENANT", "Junk", "JunkFeeder"]

JUNK_TENANT = "chaos-junk"


@dataclass(frozen=True, slots=True)
class Junk:
    name: str
    code: str | None  # the dead letter's code; None: Kafka refuses it before any worker
    body: Callable[[int], bytes]
    key: str = JUNK_TENANT


def _turn(n: int, **changes: object) -> bytes:
    turn = {
        "type": "TurnCompleted",
        "tenant": JUNK_TENANT,
        "thread": "foreign",
        "run": "junk",
        "turn": n,
        "query": f"junk {n}",
        "answer": "junk",
    }
    return json.dumps(turn | changes).encode()


JUNK = (
    Junk("bytes", "event_decode", lambda n: bytes(range(256)) * 3 + n.to_bytes(4, "big")),
    Junk("truncated JSON", "event_decode", lambda n: _turn(n)[:40]),
    Junk("a field of the wrong type", "event_decode", lambda n: _turn(n, turn=f"#{n}")),
    Junk("an unknown event type", "unknown_event_type", lambda n: _turn(n, type="TurnHappened")),
    Junk("a future version", "event_version", lambda n: _turn(n, version=999)),
    Junk("another tenant's event", "event_key_mismatch", lambda n: _turn(n, tenant="chaos-t000")),
    Junk("a 5 MB event", None, lambda n: _turn(n, query="x" * 5_000_000)),
)


class JunkFeeder:
    """Sends every kind of junk once a round, `every_s` apart, in a thread of its own."""

    def __init__(self, deployment: Deployment, every_s: float) -> None:
        self._deployment = deployment
        self._every_s = every_s
        self._producer = Producer(producer_config(deployment.kafka, "librdkafka"))
        self.delivered: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-junk", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """Stop sending; wait for what was sent to be acknowledged or refused."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()
        self._producer.flush(timeout_s)

    def _run(self) -> None:
        n = 0
        while not self._stopping.wait(self._every_s):
            for junk in JUNK:
                self._send(junk, n)
            n += 1

    def _send(self, junk: Junk, n: int) -> None:
        def delivered(error: KafkaError | None, _: Message) -> None:
            (self.refused if error is not None else self.delivered)[junk.name] += 1

        try:
            self._producer.produce(
                self._deployment.topics.memory,
                junk.body(n),
                key=tenant_key(junk.key),
                on_delivery=delivered,
            )
        except (KafkaException, BufferError):
            self.refused[junk.name] += 1
        self._producer.poll(0)

    def check(self, tenants: Iterable[str]) -> list[str]:
        """Defects: delivered junk without its dead letter, a letter of a workload tenant or
        of an unexpected code, refused junk that a worker should have met."""
        log = asyncio.run(read_dead_letters(self._deployment.kafka, self._deployment.topics))
        workload = {tenant_key(t) for t in tenants}
        codes = Counter(letter.code for letter in log.letters)
        defects = [
            f"a write of tenant {letter.tenant} was dead-lettered ({letter.code}: {letter.reason})"
            for letter in log.letters
            if letter.message.key in workload
        ]
        expected: Counter[str] = Counter()
        for junk in JUNK:
            if junk.code is None:
                if self.delivered[junk.name]:
                    defects.append(f"Kafka took {junk.name}, which it should refuse")
            else:
                expected[junk.code] += self.delivered[junk.name]
        for code, count in expected.items():
            # At least once: a worker killed after it dead-lettered a message and before it
            # committed may dead-letter it again.
            if codes[code] < count:
                defects.append(f"{count} junk messages of code {code} sent, {codes[code]} letters")
        for code in set(codes) - set(expected):
            defects.append(f"{codes[code]} dead letters of unexpected code {code}")
        return defects
