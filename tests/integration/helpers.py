"""Helpers for integration tests: publish, read topics, and wait on conditions with deadlines."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import redis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition

from memstream import MemoryEvent, Settings, TurnCompleted
from memstream.binaries import cache_dir, redis_home
from memstream.deployment import Deployment
from memstream.memory.embeddings import Embedder
from memstream.operations import worker_process
from memstream.processes import quiet_port
from memstream.projections.connection import RedisConnection, redis_client
from memstream.projections.recall import RedisRecaller
from memstream.projections.schema import Keyspace
from memstream.projections.status import ProjectionStatus
from memstream.providers import EmbedderCatalogue, embedder_from_settings, embedding_model_id
from memstream.streams.event_publisher import EventPublisher
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import Topics, ensure_topics

DEADLINE_S = 60.0


def start_worker(
    env: dict[str, str], log: Path, program: Sequence[str] = ("-m", "memstream")
) -> subprocess.Popen[bytes]:
    """A `memstream worker` process on `env`'s namespace, logging to `log`; it serves no
    metrics (several run at once, and would contend for MEMSTREAM_WORKER_METRICS_PORT).
    `program`: what Python runs, given the worker's arguments."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                *program,
                "worker",
                "--loglevel",
                "info",
                "--metrics-port",
                "0",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def thread_orders(client: redis.Redis, keys: Keyspace, tenant: str) -> dict[str, list[str]]:
    """The tenant's thread orders as Redis holds them: thread tag -> memory ids, in order."""
    prefix = keys.orders_prefix(tenant)
    return {
        key.decode().removeprefix(prefix): [
            m.decode().rsplit(":", 1)[1] for m in client.zrange(key, 0, -1)
        ]
        for key in client.scan_iter(match=f"{prefix}*")
        if not key.decode().removeprefix(prefix).startswith("s:")  # a subject's order
    }


def said_in_threads(
    client: redis.Redis, keys: Keyspace, tenant: str, ids: set[str]
) -> dict[str, list[str]]:
    """What the thread orders must be, from the memories themselves: each thread's
    conversation memories by time, then log offset, then id."""
    threads: dict[str, list[tuple[float, int, str]]] = {}
    for memory_id in ids:
        kind, tag, at, lineage = client.hmget(
            keys.memory(tenant, memory_id), ["memory_type", "thread_tag", "timestamp", "lineage"]
        )
        if kind == b"conversation" and tag:
            offset = json.loads(lineage)[4] if lineage else -1
            threads.setdefault(tag.decode(), []).append((float(at), offset, memory_id))
    return {tag: [i for *_, i in sorted(said)] for tag, said in threads.items()}


def worker_stacks(worker: subprocess.Popen[bytes], log: Path, wait_s: float = 30.0) -> str:
    """The end of a worker's log, then the stacks it was asked for (SIGQUIT: every thread's,
    even with its event loop blocked; SIGUSR1: its tasks', once its loop takes the signal: on
    two loaded cores, just after a broker came back, that took over 10 s once), for a
    failure's report."""
    before = log.read_text(errors="replace")
    if worker.poll() is not None:
        return before[-30_000:]
    worker.send_signal(signal.SIGQUIT)
    worker.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + wait_s
    while True:
        said = log.read_text(errors="replace")[len(before) :]
        if all(marker in said for marker in _STACKS_SAID) or time.monotonic() > deadline:
            return before[-10_000:] + said
        time.sleep(0.05)


# What faulthandler's dump (SIGQUIT) and mode's (SIGUSR1: "THREAD <name>", then tasks) print.
_STACKS_SAID = ("most recent call first", "THREAD ")


def stop_worker(worker: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    """SIGTERM, and the worker gone within `timeout`; one that hangs is killed, and the failure
    shows its stacks."""
    worker.terminate()
    try:
        worker.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stacks = worker_stacks(worker, log)
        worker.kill()
        worker.wait()
        raise AssertionError(f"the worker ignored SIGTERM for {timeout:.0f}s:\n{stacks}") from None


def running_worker(
    env: dict[str, str], log: Path, loglevel: str = "info"
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """A worker that is projecting when the block starts, and stopped when it ends."""
    stack = TestStack(Settings.from_env(env))
    probe = stack.turn("__probe__", "is the worker up?", "yes")
    return worker_process(Deployment(stack.settings), log, probe, loglevel=loglevel)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


class OwnRedis:
    """A Redis (with search) the test starts itself on a free port: restarting the shared one
    would disturb every other test and engineer on the machine."""

    def __init__(self, folder: Path) -> None:
        self.port = quiet_port()  # restarted on it: below the ephemeral range
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._home = redis_home(cache_dir())
        self._folder = folder
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, data: Path, *options: str) -> subprocess.Popen[bytes]:
        """Start on `data` (loading what is there) and return at once; `options` are more
        redis-server flags."""
        data.mkdir(parents=True, exist_ok=True)
        command = [
            str(self._home / "bin" / "redis-server"),
            "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(data),
            "--save", "", "--appendonly", "no",
            "--loadmodule", str(self._home / "lib" / "redisearch.so"),
            "--loadmodule", str(self._home / "lib" / "rejson.so"),
            *options,
        ]  # fmt: skip
        with (self._folder / "redis.log").open("ab") as out:
            self._process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        return self._process

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def answers(self) -> bool:
        try:
            return bool(self.client().ping())
        except redis.RedisError:  # not listening yet, or LOADING
            return False

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    @contextlib.contextmanager
    def running(self, data: Path, *options: str) -> Iterator[OwnRedis]:
        self.start(data, *options)
        try:
            wait_until(self.answers, f"the test's Redis on port {self.port}")
            yield self
        finally:
            self.stop()


class TestStack:
    """The session's namespace on the real Kafka and Redis."""

    __test__ = False  # not a test class, despite the name

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topics = Topics(settings.namespace, settings.partitions)
        self.keys = Keyspace(settings.namespace)
        self.kafka = KafkaConnection.from_settings(settings)
        self.redis = redis_client(RedisConnection.from_settings(settings))
        self.status = ProjectionStatus(self.redis, self.keys)
        self.model_id = embedding_model_id(settings)

    def turn(
        self, tenant: str, query: str, answer: str, *, thread: str = "t1", turn: int = 0
    ) -> TurnCompleted:
        return TurnCompleted(
            tenant=tenant,
            thread=thread,
            run=f"run-{uuid.uuid4().hex[:8]}",
            turn=turn,
            query=query,
            answer=answer,
            recorded_at=datetime.now(UTC),
            importance=0.5,
            embedding_model=self.model_id,
        )

    def publish(self, events: Sequence[MemoryEvent]) -> None:
        async def send() -> None:
            async with EventPublisher(self.kafka, self.topics) as publisher:
                await publisher.publish(events)

        asyncio.run(send())

    def publish_raw(self, key: bytes, value: bytes) -> None:
        async def send() -> None:
            producer = AIOKafkaProducer(**self.kafka.aiokafka())
            await producer.start()
            try:
                await producer.send_and_wait(self.topics.memory, value, key=key)
            finally:
                await producer.stop()

        asyncio.run(send())

    def wait_applied(self, events: Sequence[MemoryEvent]) -> None:
        wait_until(
            lambda: not self.status.unapplied(events), f"{len(events)} events to be projected"
        )

    def recaller(self, **tuning: float) -> RedisRecaller:
        """The stack's recaller, with `tuning`'s knobs changed from the settings'."""
        return RedisRecaller(
            self.redis,
            self.keys,
            EmbedderCatalogue(self.settings, shared_embedder(self.settings)),
            tuning=replace(Deployment(self.settings).recall_tuning(), **tuning),
        )

    def stored_memories(self, tenant: str) -> int:
        """Memory hashes of `tenant` in the live generation, counted by key (not by the order
        set)."""
        prefix = self.status.live().tenant_memory_prefix(tenant)
        return sum(1 for _ in self.redis.scan_iter(match=f"{prefix}*"))

    def wait_until_projecting(self, process: subprocess.Popen[bytes], log: Path) -> None:
        # The worker creates the topics at start; on a loaded machine the probe outruns it.
        asyncio.run(ensure_topics(self.kafka, self.topics))
        probe = self.turn("__probe__", "is the worker up?", "yes")
        self.publish([probe])

        def projecting() -> bool:
            assert process.poll() is None, f"the worker exited:\n{log.read_text()[-3000:]}"
            return not self.status.unapplied([probe])

        wait_until(projecting, "the worker to project its probe")

    def read_whole(self, topic: str) -> list[ConsumerRecord]:
        """Every record of `topic`, up to its end now."""
        ends = self.end_offsets(topic)
        return self.read_topic(topic, lambda records: len(records) >= sum(ends.values()))

    def read_topic(
        self, topic: str, until: Callable[[list[ConsumerRecord]], bool]
    ) -> list[ConsumerRecord]:
        """Records of `topic` from its start, read until `until(records)` holds."""

        async def read() -> list[ConsumerRecord]:
            consumer = AIOKafkaConsumer(
                topic,
                **self.kafka.aiokafka(),
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                group_id=None,
            )
            await consumer.start()
            records: list[ConsumerRecord] = []
            deadline = time.monotonic() + DEADLINE_S
            try:
                while not until(records):
                    if time.monotonic() > deadline:
                        raise AssertionError(f"timed out reading {topic}: {len(records)} records")
                    batches = await consumer.getmany(timeout_ms=200)
                    for batch in batches.values():
                        records.extend(batch)
            finally:
                await consumer.stop()
            return records

        return asyncio.run(read())

    def end_offsets(self, topic: str) -> dict[int, int]:
        """The next offset of each partition of `topic` (the memory topic's partitions)."""

        async def read() -> dict[int, int]:
            consumer = AIOKafkaConsumer(**self.kafka.aiokafka())
            await consumer.start()
            try:
                partitions = [TopicPartition(topic, p) for p in range(self.settings.partitions)]
                offsets = await consumer.end_offsets(partitions)
                return {tp.partition: offset for tp, offset in offsets.items()}
            finally:
                await consumer.stop()

        offsets = asyncio.run(read())
        assert len(offsets) == self.settings.partitions, offsets
        return offsets


_EMBEDDERS: dict[str, Embedder] = {}


def shared_embedder(settings: Settings) -> Embedder:
    # Loading the model takes a moment; one per test session is enough.
    if settings.embedder not in _EMBEDDERS:
        _EMBEDDERS[settings.embedder] = embedder_from_settings(settings)
    return _EMBEDDERS[settings.embedder]


@contextlib.contextmanager
def scripted_chat(reply: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An OpenAI-compatible chat endpoint on a free loopback port that answers every request
    with `reply` (120 tokens in, 9 out); yields its base URL and the requests it was sent."""
    asked: list[dict[str, Any]] = []

    class Scripted(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            asked.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            body = json.dumps(
                {
                    "choices": [{"message": {"role": "assistant", "content": reply}}],
                    "usage": {"prompt_tokens": 120, "completion_tokens": 9},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", asked
    finally:
        httpd.shutdown()


# A LoCoMo file of one short conversation, for the benches that read one (`--data`).
TINY_LOCOMO = [
    {
        "sample_id": "conv-tiny",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "I painted a sunrise in 2022."},
                {"speaker": "Caroline", "dia_id": "D1:3", "text": "I want to study psychology."},
            ],
        },
        "qa": [
            {"question": "When did Melanie paint a sunrise?", "evidence": ["D1:2"], "category": 2},
            {"question": "What will Caroline study?", "evidence": ["D1:3"], "category": 1},
            {"question": "Adversarial?", "evidence": ["D1:1"], "category": 5},
        ],
    }
]
