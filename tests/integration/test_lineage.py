"""Lineage on the real stack: what a turn was shown, recorded by the memory middleware, read
back by `memstream explain` and traced to the turn that recorded each memory."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.deployment import Deployment
from memstream.eventsourced import EventSourcedStores
from memstream.hooks import RecallConfig, RecordConfig, SemanticMemoryMiddleware

from .commands import memstream
from .helpers import TestStack, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def stores(stack: TestStack) -> Iterator[EventSourcedStores]:
    with Deployment(stack.settings) as deployment:
        yield deployment.stores()


def test_explain_shows_what_the_turn_was_shown_in_prompt_order_and_where_each_came_from(
    stack: TestStack, stores: EventSourcedStores, env: dict[str, str]
) -> None:
    tenant = f"lineage-{uuid.uuid4().hex[:8]}"
    model = ScriptedModel(["Noted.", "Your dog is Rex."])
    memory = SemanticMemoryMiddleware(
        stores=stores, client=ScriptedModel([]), recall=RecallConfig(), record=RecordConfig()
    )
    agent = Agent(model, middleware=[memory])
    agent.run("My dog is called Rex.", RunConfig("monday", tenant), run_id=f"told-{tenant}")
    assert stores.publisher.flush(30)
    wait_until(lambda: stack.stored_memories(tenant) == 2, "the first turn projected")
    agent.run("What is my dog called?", RunConfig("tuesday", tenant), run_id=f"asked-{tenant}")
    assert stores.publisher.flush(30)
    # The answer restated what the turn was shown: an echo, so the question alone is kept.
    wait_until(lambda: stack.stored_memories(tenant) == 3, "the second turn projected")
    contents = {h.memory.content for h in stack.recaller().recall(tenant, "dog", k=10)}
    assert "What is my dog called?" in contents and "Your dog is Rex." not in contents
    prompt = model.requests[1].sections[0].content

    explained = memstream(env, "explain", "--tenant", tenant, "--run", f"asked-{tenant}", "--json")
    assert explained.returncode == 0, explained.stderr
    (turn,) = json.loads(explained.stdout)
    assert (turn["turn"]["run"], turn["turn"]["thread"]) == (f"asked-{tenant}", "tuesday")
    assert turn["turn"]["event_type"] == "TurnCompleted" and turn["turn"]["offset"] >= 0
    shown = turn["shown"]
    # Both memories of the first turn were in the prompt: the ids in the order it shows them.
    assert {s["content"] for s in shown} == {"My dog is called Rex.", "Noted."}
    assert [s["content"] for s in shown] == sorted((s["content"] for s in shown), key=prompt.index)
    for s in shown:
        assert s["held"] is True
        lineage = s["provenance"]
        assert (lineage["run"], lineage["turn"], lineage["thread"]) == (
            f"told-{tenant}",
            0,
            "monday",
        )
        assert lineage["offset"] < turn["turn"]["offset"]  # recorded before it was shown
    # The projection says the same of each memory as the log does.
    held = stack.recaller().recall(tenant, "dog", k=10)
    by_id = {h.memory.id: h.memory.provenance for h in held}
    assert all(
        by_id[s["id"]] is not None and by_id[s["id"]].offset == s["provenance"]["offset"]
        for s in shown
    )

    # The first turn was shown nothing; the words say where each memory came from.
    told = memstream(env, "explain", "--tenant", tenant, "--run", f"told-{tenant}", "--json")
    assert [t["shown"] for t in json.loads(told.stdout)] == [[]]
    text = memstream(env, "explain", "--tenant", tenant, "--run", f"asked-{tenant}", "--turn", "0")
    assert text.returncode == 0, text.stderr
    assert f"recorded by run told-{tenant} turn 0 (thread monday)" in text.stdout
    assert "My dog is called Rex." in text.stdout


def test_explain_of_an_unknown_run_says_what_to_check(env: dict[str, str]) -> None:
    missing = memstream(env, "explain", "--tenant", "nobody-here", "--run", "no-such-run")
    assert missing.returncode == 1
    assert (
        "no recorded run 'no-such-run'" in missing.stderr and "check the run id" in missing.stderr
    )
