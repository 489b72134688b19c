"""A run's context: its configuration, clock, committed state, usage accounting and effects.

Hooks receive the RunContext of their run. Through it they read the thread's committed state,
count the model calls they make in the thread's usage (`accounted`), and run side effects
through the journal (`effect`), so that a crashed run can be recovered without doing them
twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from memstream.agent.journal import EffectRecord, EffectTicket, Journal, begin_effect, run_effect
from memstream.llm import ModelClient, ModelRequest, ModelResponse, Usage

__all__ = ["Clock", "RunConfig", "RunContext", "SystemClock"]

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Who the run is for: the thread, the tenant (None: a run without one), extra values."""

    thread_id: str
    tenant_id: str | None = None
    values: Mapping[str, Any] = field(default_factory=dict)


class _AccountedClient:
    def __init__(self, client: ModelClient, count: Callable[[Usage], None]) -> None:
        self._client = client
        self._count = count

    def complete(self, request: ModelRequest) -> ModelResponse:
        response = self._client.complete(request)
        self._count(Usage(1, response.usage.input_tokens, response.usage.output_tokens))
        return response


class RunContext:
    def __init__(
        self,
        *,
        run_id: str,
        config: RunConfig,
        clock: Clock,
        journal: Journal,
        state: dict[str, Any],
        count_usage: Callable[[Usage], None],
        turn_index: int,
    ) -> None:
        self.run_id = run_id
        self.config = config
        self.clock = clock
        self.turn_index = turn_index
        self._journal = journal
        self._state = state
        self._count_usage = count_usage
        self.approved = False
        self.answer: str | None = None

    @property
    def state(self) -> Mapping[str, Any]:
        """The thread's committed state, read-only: hooks change it only by returning updates."""
        return MappingProxyType(self._state)

    def accounted(self, client: ModelClient) -> ModelClient:
        """`client`, with every call it makes counted in this thread's usage."""
        return _AccountedClient(client, self.record_usage)

    def record_usage(self, usage: Usage) -> None:
        self._count_usage(usage)

    def effect(
        self,
        name: str,
        key: str,
        fn: Callable[[], T],
        *,
        replay_safe: bool = False,
        encode: Callable[[T], Any] = lambda value: value,
        decode: Callable[[Any], T] = lambda value: value,
    ) -> T:
        """Run `fn` as a journaled effect of this run (see `journal.run_effect`)."""
        return run_effect(
            self._journal,
            self.run_id,
            name,
            key,
            fn,
            replay_safe=replay_safe,
            encode=encode,
            decode=decode,
        )

    def begin_effect(
        self, name: str, key: str, *, replay_safe: bool = False
    ) -> EffectRecord | EffectTicket:
        """Start an effect whose outcome is known later (see `journal.begin_effect`)."""
        return begin_effect(self._journal, self.run_id, name, key, replay_safe=replay_safe)
