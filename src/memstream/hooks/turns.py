"""What a memory middleware does in one turn, whatever agent framework runs it.

The seed's semantics live here once, for memstream's own runtime (`hooks.middleware`) and for
the framework adapters (`integrations.langchain`):

- recall: the manager's relevant context for the turn's input, cut to
  `max_recall_tokens * 4` characters;
- record: the turn's query and answer as one event (each cut to `max_record_chars`, importance
  decided now, with the ids of the memories recall showed the turn), written by the
  manager's `record_turn` to the tenant's store without waiting for the log;
- a step that failed after the answer is skipped and announced by a `Skipped` event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memstream.errors import MemstreamError
from memstream.memory.echo import restates
from memstream.memory.manager import LLMMemoryManager, PromptContext
from memstream.memory.model import DEFAULT_MAX_RECORD_CHARS
from memstream.memory.monitoring import Skipped

__all__ = ["RecallConfig", "RecordConfig", "is_echo", "recall_context", "skipped"]

Stage = Literal["recall", "record", "consolidate"]


@dataclass(frozen=True, slots=True)
class RecallConfig:
    max_recall_tokens: int = 600

    @property
    def max_chars(self) -> int:
        return self.max_recall_tokens * 4


@dataclass(frozen=True, slots=True)
class RecordConfig:
    """`echo_control`: an answer that only restates what the turn was shown writes no memory
    of its own (memory.echo, docs/lineage.md); the user's words are recorded either way."""

    max_record_chars: int = DEFAULT_MAX_RECORD_CHARS
    echo_control: bool = True


def recall_context(manager: LLMMemoryManager, input: str, config: RecallConfig) -> PromptContext:
    """The memories relevant to `input`, in sections, within the recall budget (the manager
    cuts to it: the one cut the recalled text gets), with the ids of those shown, in order:
    what the turn records as shown (docs/lineage.md), known here at no extra cost."""
    return manager.prompt_context(input, config.max_chars)


def is_echo(config: RecordConfig, shown: Sequence[str], recalled: str, answer: str) -> bool:
    """Whether the turn's answer is an echo, to be recorded as such (it then writes no
    memory): echo control is on, the turn was shown memories, and the answer only restates
    the `recalled` text (memory.echo)."""
    return config.echo_control and bool(shown) and restates(answer, recalled)


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
