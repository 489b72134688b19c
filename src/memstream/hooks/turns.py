"""What a memory middleware does in one turn, whatever agent framework runs it.

The seed's semantics live here once, for memstream's own runtime (`hooks.middleware`) and for
the framework adapters (`integrations.langchain`):

- recall: the manager's relevant context for the turn's input, cut to
  `max_recall_tokens * 4` characters;
- record: the turn's query and answer as one event (each cut to `max_record_chars`, importance
  decided now), handed to the tenant's store without waiting for the log;
- a step that failed after the answer is skipped and announced by a `Skipped` event.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memstream.errors import MemstreamError
from memstream.memory.events import TurnCompleted
from memstream.memory.manager import LLMMemoryManager, cut
from memstream.memory.model import DEFAULT_MAX_RECORD_CHARS
from memstream.memory.monitoring import Skipped

__all__ = ["RecallConfig", "RecordConfig", "recall_context", "record_turn", "skipped"]

Stage = Literal["recall", "record", "consolidate"]


@dataclass(frozen=True, slots=True)
class RecallConfig:
    max_recall_tokens: int = 600

    @property
    def max_chars(self) -> int:
        return self.max_recall_tokens * 4


@dataclass(frozen=True, slots=True)
class RecordConfig:
    max_record_chars: int = DEFAULT_MAX_RECORD_CHARS


def recall_context(manager: LLMMemoryManager, input: str, config: RecallConfig) -> str:
    """The memories relevant to `input`, in sections, within the recall budget."""
    return cut(manager.get_relevant_context(input, config.max_chars), config.max_chars)


def record_turn(
    manager: LLMMemoryManager,
    config: RecordConfig,
    *,
    thread: str,
    run: str,
    turn: int,
    query: str,
    answer: str,
    at: datetime,
) -> TurnCompleted:
    """Record one turn through the manager's store (its write never waits for the log)."""
    event = manager.record_turn(
        thread=thread,
        run=run,
        turn=turn,
        query=query,
        answer=answer,
        at=at,
        max_chars=config.max_record_chars,
    )
    manager.store.write(event)
    return event


def skipped(
    *, tenant: str, thread: str, run_id: str, stage: Stage, error: MemstreamError, at: datetime
) -> Skipped:
    """The announcement of a step memory skipped (the turn itself went on)."""
    return Skipped(
        tenant=tenant,
        thread=thread,
        run_id=run_id,
        stage=stage,
        code=error.code,
        reason=str(error),
        at=at,
    )
