"""Echo control: whether a turn's answer only restates what the turn was shown.

A model that answers from memory says again what recall showed it. Recorded as a memory of its
own, each such restatement is one more copy of a fact, competing with the fact for the
tenant's bound: over many turns the copies fill the bound and evict the facts they copy.
`restates` decides, when the turn is recorded, whether the answer is such an echo; the turn's
event carries the decision (`TurnCompleted.echo`), so a replay decides nothing again, and an
echo's answer writes no memory (docs/lineage.md, "Echo control"). The user's words are always
recorded.

The test is lexical and cheap (no model, no vector): the answer is an echo when at least
`ECHO_SHARE` of its distinct content words (3 or more letters or digits, common function
words aside) are words of the text the turn was shown.
"""

from __future__ import annotations

import re

__all__ = ["ECHO_SHARE", "restates"]

ECHO_SHARE = 0.75

_WORD = re.compile(r"[^\W_]{3,}")
# Words an answer wraps a restatement in, which carry none of its content.
_FUNCTION = frozenset({
    "the", "and", "you", "your", "yours", "told", "tell", "said", "say", "mentioned", "remember",
    "remembered", "recall", "noted", "that", "this", "these", "those", "was", "were", "are",
    "has", "have", "had", "with", "for", "from", "about", "what", "which", "who", "earlier",
    "before", "already", "yes", "right", "sure", "okay",
})  # fmt: skip


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _FUNCTION}


def restates(answer: str, shown: str) -> bool:
    """Whether `answer` only restates `shown`, the text of the memories the turn was shown."""
    words = _content_words(answer)
    if not words or not shown:
        return False
    covered = words & _content_words(shown)
    return len(covered) >= ECHO_SHARE * len(words)
