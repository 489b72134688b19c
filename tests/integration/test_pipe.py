"""record → Kafka → Faust worker → Redis → recall, on the real stack."""

from __future__ import annotations

import dataclasses
import json
import uuid

import pytest

from memstream.memory.events import memories_of
from memstream.memory.monitoring import DeadLettered

from .helpers import TestStack

pytestmark = pytest.mark.integration

ODD_TENANTS = ["a|b", "{x}", "*", "-", "@", "a b", "ünïcødé", "租户", "a,b", "Acme", "acme"]


def unique(tenant: str) -> str:
    """The tenant id with a per-test suffix, so reruns never see each other's memories."""
    return f"{tenant}{uuid.uuid4().hex[:6]}"


def test_a_turn_recorded_in_one_thread_is_recalled_in_another(stack: TestStack) -> None:
    tenant = unique("acme")
    event = stack.turn(tenant, "My dog is called Rex.", "Rex is a fine name.", thread="thread-1")
    stack.publish([event])
    stack.wait_applied([event])

    hits = stack.recaller().recall(tenant, "What is the name of my dog?", k=2)

    assert [h.memory.content for h in hits][:1] == ["My dog is called Rex."]
    assert {h.memory.thread for h in hits} == {"thread-1"}
    assert all(h.memory.tenant == tenant for h in hits)
    assert stack.recaller().recall(unique("other"), "What is the name of my dog?") == []


def test_tenants_with_query_syntax_in_their_ids_never_see_each_other(stack: TestStack) -> None:
    suffix = uuid.uuid4().hex[:6]
    tenants = [f"{t}{suffix}" for t in ODD_TENANTS] + ODD_TENANTS
    events = [stack.turn(t, f"secret of tenant {t!r}", f"kept for {t!r}") for t in tenants]
    stack.publish(events)
    stack.wait_applied(events)

    recaller = stack.recaller()
    for tenant in tenants:
        hits = recaller.recall(tenant, "secret of tenant", k=50)
        assert {h.memory.tenant for h in hits} == {tenant}
        # Earlier sessions may have left memories under the bare ids; ours must be there.
        assert f"secret of tenant {tenant!r}" in {h.memory.content for h in hits}


def test_the_same_turn_delivered_twice_leaves_exactly_two_memories(stack: TestStack) -> None:
    tenant = unique("dup")
    event = stack.turn(tenant, "I prefer tea to coffee.", "Tea it is.")
    stack.publish([event])
    stack.publish([event])  # a second producer: two copies in the log
    marker = stack.turn(tenant, "after the duplicates", "ok")
    stack.publish([marker])
    stack.wait_applied([event, marker])

    assert stack.stored_memories(tenant) == 4  # two for the duplicated turn, two for the marker
    contents = [h.memory.content for h in stack.recaller().recall(tenant, "tea", k=10)]
    assert contents.count("I prefer tea to coffee.") == 1


def test_a_malformed_message_is_dead_lettered_and_the_worker_goes_on(stack: TestStack) -> None:
    tenant = unique("dl")
    key = tenant.encode()
    stack.publish_raw(key, b"{not an event")
    following = stack.turn(tenant, "after the bad message", "still projected")
    stack.publish([following])
    stack.wait_applied([following])

    dead = stack.read_topic(
        stack.topics.dead_letters, lambda records: any(r.key == key for r in records)
    )
    (letter,) = [r for r in dead if r.key == key]
    headers = dict(letter.headers)
    assert letter.value == b"{not an event"
    assert headers["memstream-error-code"] == b"event_decode"
    assert b"not a JSON event" in headers["memstream-error"]
    source = headers["memstream-source"].decode()
    assert source.startswith(f"{stack.topics.memory}/")

    notices = stack.read_topic(
        stack.topics.monitoring, lambda records: any(r.key == key for r in records)
    )
    (notice,) = [json.loads(r.value) for r in notices if r.key == key]
    assert notice["type"] == DeadLettered.type and notice["version"] == DeadLettered.version
    assert f"{notice['source_topic']}/{notice['partition']}/{notice['offset']}" == source
    assert notice["code"] == "event_decode"


def test_an_event_recorded_for_another_embedding_model_is_projected_with_the_projections(
    stack: TestStack,
) -> None:
    # The model an event names is what its producer used: information, never a reason to
    # refuse it. The projection embeds it with the model its live generation was built with.
    tenant = unique("model")
    foreign = dataclasses.replace(stack.turn(tenant, "q", "a"), embedding_model="other-model@9")
    stack.publish([foreign])
    stack.wait_applied([foreign])
    assert stack.stored_memories(tenant) == 2
    live = stack.status.live()
    models = {
        stack.redis.hget(live.memory(tenant, m.id), "embedding_model") for m in memories_of(foreign)
    }
    assert models == {stack.model_id.encode()}
