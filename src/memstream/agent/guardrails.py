"""Guardrails (id "guardrails"): block inputs or answers that match a rule.

Rules are regular expressions with the message a block reports. Input rules run in
before_agent, so a blocked input reaches no model; answer rules run in after_agent, where a
block withholds the answer and restores the thread's state — and, since after_agent runs in
reverse stack order, stops every middleware registered before this one (a memory middleware
registered outside guardrails never records a blocked answer).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memstream.agent.context import RunContext
from memstream.agent.middleware import AgentMiddleware, Block, Proceed, Turn

__all__ = ["Guardrails", "Rule"]


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str]
    message: str

    @classmethod
    def matching(cls, pattern: str, message: str) -> Rule:
        return cls(re.compile(pattern, re.IGNORECASE), message)


class Guardrails(AgentMiddleware):
    id = "guardrails"

    def __init__(self, *, inputs: Iterable[Rule] = (), answers: Iterable[Rule] = ()) -> None:
        self._inputs = tuple(inputs)
        self._answers = tuple(answers)

    def before_agent(self, input: str, context: RunContext) -> Proceed | Block:
        return _check(self._inputs, input)

    def after_agent(self, turn: Turn, context: RunContext) -> Proceed | Block:
        return _check(self._answers, turn.answer)


def _check(rules: tuple[Rule, ...], text: str) -> Proceed | Block:
    for rule in rules:
        if rule.pattern.search(text):
            return Block(rule.message)
    return Proceed()
