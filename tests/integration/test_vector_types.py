"""A namespace moved from float32 vectors to float16 by a replay, on the real stack: a generation
keeps the type it was built with (one from before the choice is float32), readers that started
before the swap follow it, a one-tenant rebuild stores as the live generation does, and recall
finds the same memories in both."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstream import Settings, TurnCompleted
from memstream.deployment import Deployment
from memstream.operations import drop
from memstream.projections.connection import text
from memstream.projections.recall import RedisRecaller
from memstream.projections.schema import Fields

from .commands import memstream
from .helpers import TestStack, running_worker

pytestmark = pytest.mark.integration

TENANTS = ("vt-a", "vt-b")
FACTS = (
    ("Which city did Maya move to?", "Maya moved to Lisbon in March."),
    ("What does Tom drive now?", "Tom drives a green cargo bike."),
    ("When is the team offsite?", "The offsite is on the ninth of June."),
    ("Who bakes the sourdough?", "Priya bakes the sourdough every Friday."),
)


@pytest.fixture
def envs(env: dict[str, str]) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    base = env | {"MEMSTREAM_NAMESPACE": f"vtypes-{uuid.uuid4().hex[:8]}"}
    yield base | {"MEMSTREAM_VECTOR_TYPE": "float32"}, base | {"MEMSTREAM_VECTOR_TYPE": "float16"}
    drop(Deployment(Settings.from_env(base)))


def turns(stack: TestStack, tenant: str, tag: str) -> list[TurnCompleted]:
    return [
        stack.turn(tenant, f"[{tag}] {query}", f"[{tag}] {answer}", thread=f"{tag}-{n}")
        for n, (query, answer) in enumerate(FACTS)
    ]


def stored(stack: TestStack) -> tuple[str | None, str]:
    """The live generation's meta `vector_type` (None: not recorded) and its index's type."""
    live = stack.status.live()
    recorded = stack.redis.hget(live.meta, "vector_type")
    info = stack.redis.ft(live.index_name).info()  # type: ignore[no-untyped-call]
    (embedding,) = [a for a in info["attributes"] if text(a[1]) == Fields.EMBEDDING]
    flat = [text(part) for part in embedding]
    indexed = flat[flat.index("data_type") + 1]
    return (text(recorded) if recorded is not None else None), indexed


def blob_sizes(stack: TestStack, tenant: str) -> set[int]:
    prefix = stack.status.live().tenant_memory_prefix(tenant)
    keys = list(stack.redis.scan_iter(match=f"{prefix}*"))
    return {len(stack.redis.hget(key, Fields.EMBEDDING) or b"") for key in keys}


def said(tag: str) -> list[str]:
    return [f"[{tag}] {answer}" for _, answer in FACTS]


def answers(recaller: RedisRecaller, tenant: str, tag: str) -> list[str]:
    """The first hit of each fact's question: its answer."""
    return [
        recaller.recall(tenant, f"[{tag}] {query}", k=3)[0].memory.content for query, _ in FACTS
    ]


def test_a_replay_moves_a_float32_namespace_to_float16_and_recall_finds_the_same(
    envs: tuple[dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    env32, env16 = envs
    old, new = TestStack(Settings.from_env(env32)), TestStack(Settings.from_env(env16))
    dims = Deployment(new.settings).embedder.dims
    first = [t for tenant in TENANTS for t in turns(old, tenant, "before")]
    with running_worker(env32, tmp_path / "worker32.log"):
        old.publish(first)
        old.wait_applied(first)
    assert stored(old) == ("float32", "FLOAT32")
    assert blob_sizes(old, TENANTS[0]) == {4 * dims}
    # As a generation built before the type was chosen: its meta does not say.
    old.redis.hdel(old.status.live().meta, "vector_type")

    reader = new.recaller()  # a reader from before the swap, kept through it
    expected = said("before")
    assert answers(reader, TENANTS[0], "before") == expected
    with running_worker(env16, tmp_path / "worker16.log"):
        # A float16 worker keeps writing the float32 generation as it stores.
        during = turns(new, TENANTS[0], "during")
        new.publish(during)
        new.wait_applied(during)
        assert stored(new) == (None, "FLOAT32")
        assert blob_sizes(new, TENANTS[0]) == {4 * dims}
        assert answers(reader, TENANTS[0], "during") == said("during")

        replayed = memstream(env16, "replay")
        assert replayed.returncode == 0, replayed.stderr
        assert stored(new) == ("float16", "FLOAT16")
        for tenant in TENANTS:
            assert blob_sizes(new, tenant) == {2 * dims}
        after = turns(new, TENANTS[1], "after")
        new.publish(after)
        new.wait_applied(after)
        assert blob_sizes(new, TENANTS[1]) == {2 * dims}

        # The reader learnt float32 before the swap; it follows the live generation.
        for recaller in (reader, new.recaller(), old.recaller()):
            assert answers(recaller, TENANTS[0], "before") == expected
            assert answers(recaller, TENANTS[0], "during") == said("during")
            assert answers(recaller, TENANTS[1], "after") == said("after")

        # A one-tenant rebuild by a float32-configured process: its keys are renamed into
        # the float16 generation, so they are stored as float16.
        rebuilt = memstream(env32, "replay", "--tenant", TENANTS[1])
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert stored(old) == ("float16", "FLOAT16")
        assert blob_sizes(old, TENANTS[1]) == {2 * dims}
        assert new.stored_memories(TENANTS[1]) == 2 * 2 * len(FACTS)  # before and after
        assert answers(old.recaller(), TENANTS[1], "after") == said("after")
        assert answers(reader, TENANTS[1], "before") == said("before")

    verified = memstream(env16, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
