"""Building the stack: hook names checked, runs_before ordering, the state schema."""

import pytest

from memstream.agent import Agent, AgentMiddleware, ScriptedModel
from memstream.agent.runtime import order_stack
from memstream.errors import ConfigurationError


def mw(name: str, *, before: tuple[str, ...] = (), writes: tuple[str, ...] = ()) -> AgentMiddleware:
    item = AgentMiddleware()
    item.id = name
    item.runs_before = frozenset(before)
    item.writes = frozenset(writes)
    return item


def ids(stack: tuple[AgentMiddleware, ...]) -> list[str]:
    return [m.id for m in stack]


def test_registration_order_is_kept_when_no_constraint_says_otherwise() -> None:
    assert ids(order_stack([mw("a"), mw("b"), mw("c")])) == ["a", "b", "c"]


def test_runs_before_moves_a_middleware_outside_the_one_it_names() -> None:
    stack = order_stack([mw("guardrails"), mw("audit"), mw("memory", before=("guardrails",))])
    assert ids(stack) == ["memory", "guardrails", "audit"]


def test_a_cycle_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(ConfigurationError, match="cycle: a -> b -> a"):
        Agent(ScriptedModel([]), middleware=[mw("a", before=("b",)), mw("b", before=("a",))])


def test_an_unknown_id_in_runs_before_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="names 'guardrails', which is not registered"):
        Agent(ScriptedModel([]), middleware=[mw("memory", before=("guardrails",))])


def test_duplicate_ids_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="two middleware have the id 'a'"):
        order_stack([mw("a"), mw("a")])


def test_a_misspelt_hook_is_refused_at_registration() -> None:
    class Typo(AgentMiddleware):
        id = "typo"

        def after_agnet(self) -> None: ...

    with pytest.raises(ConfigurationError, match="'after_agnet', which is not a hook"):
        Agent(ScriptedModel([]), middleware=[Typo()])


def test_a_middleware_without_id_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="has no id"):
        Agent(ScriptedModel([]), middleware=[AgentMiddleware()])


def test_the_state_schema_is_the_union_of_the_writes() -> None:
    agent = Agent(
        ScriptedModel([]), middleware=[mw("a", writes=("x",)), mw("b", writes=("y", "x"))]
    )
    assert agent.state_keys == {"x", "y"}
