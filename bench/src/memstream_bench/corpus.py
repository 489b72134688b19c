"""Text for the speed benches: real conversational turns, so embedding costs what it would.

The speed benches send turns made of consecutive LoCoMo utterances when the dev data is there
(lengths and vocabulary of real chat), and plain generated sentences otherwise.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime
from pathlib import Path

from memstream.memory.events import TurnCompleted

__all__ = ["DEFAULT_LOCOMO", "conversation_texts", "turns"]

# The development split lives in the shared folder beside the checkout; benches run from the
# checkout's root (pass --data for another place).
DEFAULT_LOCOMO = Path("../shared/data/locomo/locomo-dev.json")

_SENTENCE = (
    "we talked about the trip to the lake and the new job my sister started in spring while "
    "the kids painted pottery at the camp near the river last weekend before the concert"
)
_WORDS = _SENTENCE.split(" ")


def conversation_texts(data: Path = DEFAULT_LOCOMO, limit: int = 10_000) -> list[str]:
    """Utterances from the LoCoMo file in order, or generated sentences if it is missing."""
    texts: list[str] = []
    if data.exists():
        for sample in json.loads(data.read_text(encoding="utf-8")):
            conversation = sample["conversation"]
            for key, value in conversation.items():
                if key.startswith("session_") and isinstance(value, list):
                    texts += [turn["text"] for turn in value if turn.get("text")]
    if not texts:
        rng = random.Random(7)
        texts = [" ".join(rng.choices(_WORDS, k=rng.randint(8, 30))) for _ in range(limit)]
    return texts[:limit]


def turns(
    count: int, model_id: str, *, tenants: int = 20, texts: list[str] | None = None
) -> list[TurnCompleted]:
    """`count` turns spread round-robin over `tenants`, each a fresh run (so all are new)."""
    pool = texts or conversation_texts()
    run = uuid.uuid4().hex[:8]
    now = datetime.now(UTC)
    return [
        TurnCompleted(
            tenant=f"tenant-{i % tenants}",
            thread=f"thread-{i % 7}",
            run=run,
            turn=i,
            query=pool[(2 * i) % len(pool)],
            answer=pool[(2 * i + 1) % len(pool)],
            recorded_at=now,
            importance=0.5,
            embedding_model=model_id,
        )
        for i in range(count)
    ]
