"""Questions in a conversation: a turn that asks holds what was asked, not what is known.

"Where did you go camping?" shares the words of a later question about the camping, and so
ranks high, but it knows nothing; the turn after it ("At the lake, in June") does. Two rules
follow, both measured on LoCoMo's dev split (chosen on its four tuning conversations, docs/
benchmarks.md):

- a top hit that asks hands what answered it (its turn's reply, or the next turn of its
  thread) a share of its score (`RecallTuning.answer_share`, 1 by default: the answer takes
  the question's score; the lending is `neighbours.lend`'s, as the answer is a neighbour);
- a memory that asks keeps only `RecallTuning.question_weight` (0.9) of its score, so an
  answer ranks above its question, and so does a statement that matched nearly as well.

The two pay only together (without the weight an answer ties its question, which stays
first). With recall's BM25 retuned in the same change (`bm25`), evidence recall@1 on the
held-out conversations rose from 0.30 to 0.38 and recall@10 from 0.79 to 0.80. A memory asks
when it is a conversation memory whose text ends with a question mark; a statement that ends
with a photo's description, or quotes a question inside it, does not ask.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstream.memory.model import Memory, MemoryType
from memstream.memory.ranking.fusion import Candidate

__all__ = ["asks", "weigh_questions"]


def asks(memory: Memory) -> bool:
    """Whether `memory` is a conversation turn that ends by asking."""
    return memory.memory_type is MemoryType.CONVERSATION and memory.content.rstrip().endswith("?")


def weigh_questions(
    scored: Sequence[tuple[Candidate, float]], weight: float
) -> list[tuple[Candidate, float]]:
    """`scored` with each asking memory's score times `weight`, best first (ties keep order)."""
    weighed = [(c, s * weight if asks(c.memory) else s) for c, s in scored]
    return sorted(weighed, key=lambda pair: -pair[1])
