"""The agent side's publisher builds records on its own thread, in the order they were
submitted: the caller only takes a slot in the buffer."""

from __future__ import annotations

import threading
import uuid

import pytest

from memstream.streams.background_publisher import BackgroundPublisher
from memstream.streams.wire import Record

from .helpers import TestStack

pytestmark = pytest.mark.integration


def test_records_are_built_off_the_callers_thread_and_sent_in_submission_order(
    stack: TestStack,
) -> None:
    tenant = f"built-{uuid.uuid4().hex[:6]}"
    caller = threading.get_ident()
    builders: list[int] = []

    def build(i: int) -> Record:
        builders.append(threading.get_ident())
        return Record(stack.topics.memory, tenant.encode(), f"probe {i}".encode())

    publisher = BackgroundPublisher(stack.kafka)
    try:
        for i in range(50):
            publisher.submit(lambda i=i: build(i))
        assert publisher.flush(30)
    finally:
        publisher.close()

    assert len(builders) == 50 and caller not in builders
    mine = tenant.encode()
    records = stack.read_topic(stack.topics.memory, lambda rs: sum(r.key == mine for r in rs) >= 50)
    sent = [r.value for r in records if r.key == mine]
    assert sent == [f"probe {i}".encode() for i in range(50)]


def test_a_record_that_cannot_be_built_frees_its_slot_and_the_next_is_sent(
    stack: TestStack,
) -> None:
    tenant = f"unbuilt-{uuid.uuid4().hex[:6]}"

    def broken() -> Record:
        raise ValueError("cannot encode")

    publisher = BackgroundPublisher(stack.kafka, capacity=1)
    try:
        publisher.submit(broken)
        assert publisher.flush(30)
        assert publisher.pending == 0  # the slot is free again
        publisher.submit(Record(stack.topics.memory, tenant.encode(), b"after the broken one"))
        assert publisher.flush(30)
    finally:
        publisher.close()
    records = stack.read_topic(
        stack.topics.memory, lambda rs: any(r.key == tenant.encode() for r in rs)
    )
    assert [r.value for r in records if r.key == tenant.encode()] == [b"after the broken one"]
