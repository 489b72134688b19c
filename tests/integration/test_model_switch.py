"""A rolling upgrade across a change of embedding model, on the real stack.

Agents of the old setting (MiniLM) keep recording while the worker restarts with the new one
(today's default) and `memstream replay` switches the projection's model; agents of the new
setting record all along. The worker embeds for whichever generation is live, recall embeds
each query for it too, so at the end every turn of both sides is recallable from both, none is
doubled, and nothing was dead-lettered.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstream import Settings, TurnCompleted
from memstream.deployment import Deployment
from memstream.errors import ConfigurationError
from memstream.memory.embeddings import Embedder
from memstream.memory.events import memories_of
from memstream.operations import drop
from memstream.providers.minilm import minilm_model_id

from .commands import memstream
from .helpers import running_worker, wait_until

pytestmark = pytest.mark.integration

TENANT = "acme"


class Only:
    """The Embedders of a process that can make vectors of its configured model alone."""

    def __init__(self, deployment: Deployment) -> None:
        self._deployment = deployment
        self.configured_model = deployment.embedding_model

    def configured(self) -> Embedder:
        return self._deployment.embedder

    def for_model(self, model_id: str) -> Embedder:
        if model_id != self.configured_model:
            raise ConfigurationError(f"only {self.configured_model}, not {model_id}")
        return self.configured()


class Agent(threading.Thread):
    """Records a distinct turn twice a second through the agent side's stores (the hooks'
    path: a background producer) of `deployment`, until stopped: through every phase of the
    upgrade, without so many turns that checking each one takes long."""

    def __init__(self, deployment: Deployment, side: str) -> None:
        super().__init__(daemon=True)
        self.deployment = deployment
        self.side = side
        self.turns: list[TurnCompleted] = []
        self.stop = threading.Event()

    def run(self) -> None:
        store = self.deployment.stores()(TENANT)
        while not self.stop.is_set():
            n = len(self.turns)
            turn = TurnCompleted(
                tenant=TENANT,
                thread=f"{self.side}-thread",
                run=f"{self.side}-run",
                turn=n,
                query=f"What is the {self.side} locker code number {n}?",
                answer=f"The {self.side} locker {n} opens with {1000 + 7 * n}.",
                recorded_at=datetime.now(UTC),
                importance=0.5,
                embedding_model=self.deployment.embedding_model,
            )
            store.write(turn)
            self.turns.append(turn)
            self.stop.wait(0.5)  # pacing, not a wait for anything


@pytest.fixture
def sides(env: dict[str, str]) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    base = {key: value for key, value in env.items() if key != "MEMSTREAM_EMBEDDER"}
    base |= {"MEMSTREAM_NAMESPACE": f"switch-{uuid.uuid4().hex[:8]}"}
    base |= {"MEMSTREAM_MAX_MEMORIES": "100000"}  # nothing evicted: every turn must stay
    old = base | {"MEMSTREAM_EMBEDDER": "minilm-int8"}
    yield old, base
    drop(Deployment(Settings.from_env(base)))


def test_a_rolling_upgrade_across_a_model_switch_loses_doubles_and_dead_letters_nothing(
    sides: tuple[dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    old_env, new_env = sides
    old, new = Deployment(Settings.from_env(old_env)), Deployment(Settings.from_env(new_env))
    assert old.embedding_model == minilm_model_id() != new.embedding_model
    status = new.status()
    agents = [Agent(old, "old"), Agent(new, "new")]

    def five_more_applied() -> Callable[[], bool]:
        """Whether five more turns of each agent than it has recorded now are projected."""
        marks = [len(agent.turns) + 5 for agent in agents]

        def done() -> bool:
            wanted = [t for agent, n in zip(agents, marks, strict=True) for t in agent.turns[:n]]
            return len(wanted) == sum(marks) and not status.unapplied(wanted)

        return done

    with running_worker(old_env, tmp_path / "old-worker.log"):
        for agent in agents:
            agent.start()
        wait_until(five_more_applied(), "turns of both sides under the old worker")
    assert new.embedders.for_model(minilm_model_id()) is not None
    with running_worker(new_env, tmp_path / "new-worker.log"):
        wait_until(five_more_applied(), "turns under the upgraded worker")
        assert status.live_generation() == 1  # still MiniLM's generation

        switched = memstream(new_env, "replay")
        assert switched.returncode == 0, switched.stderr
        wait_until(five_more_applied(), "turns after the switch")
        for agent in agents:
            agent.stop.set()
            agent.join()
        old.close()
        new.close()
        turns = [t for agent in agents for t in agent.turns]
        wait_until(lambda: not status.unapplied(turns), "every turn to be projected")

    assert status.live_generation() != 1
    new.projection.check_model(Only(new))  # the live generation is the new model's
    with pytest.raises(ConfigurationError, match=old.embedding_model):
        old.projection.check_model(Only(old))
    stored = {m.id: m for m in new.reader().memories(TENANT)}
    expected = {m.id for turn in turns for m in memories_of(turn)}
    assert set(stored) == expected  # none lost, none doubled
    assert {m.embedding_model for m in stored.values()} == {new.embedding_model}
    for recaller in (old.recaller(), new.recaller()):  # each process embeds for the live model
        for turn in turns:
            # The question's words find the turn; its answer ranks in the question's place.
            found = [h.memory.content for h in recaller.recall(TENANT, turn.query, k=3)]
            assert found[0] == turn.answer, (turn.query, found)

    letters = memstream(new_env, "dead-letters", "list")
    assert "0 pending of 0 dead letters" in letters.stdout, letters.stdout + letters.stderr
    verified = memstream(new_env, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_process_that_cannot_embed_for_the_live_model_fails_at_start_saying_what_to_do(
    sides: tuple[dict[str, str], dict[str, str]],
) -> None:
    _, env = sides
    deployment = Deployment(Settings.from_env(env))
    remote = "openai-compatible:text-embedding-3-small"

    async def build_with_a_remote_model() -> None:
        await deployment.ensure_topics()
        async with deployment.projection.session() as session:
            await session.writer.ensure_live_index(remote, 384)

    asyncio.run(build_with_a_remote_model())
    for command in (["worker"], ["recall", "--tenant", TENANT, "anything?"]):
        refused = memstream(env, *command)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert remote in refused.stderr and deployment.embedding_model in refused.stderr
        assert (
            "memstream replay" in refused.stderr
            and "MEMSTREAM_EMBEDDING_BASE_URL" in refused.stderr
        )
