"""The words recall searches by: a query's terms and a memory's words, stopwords dropped.

A memory is searched by its content and its date in words ("8 May 2023"), so a question
naming a date finds it lexically; the projection stores the date words (`when_text`) beside the
content, and the per-tenant BM25 counts the same words (`memory_words`).
"""

from __future__ import annotations

import re
from datetime import datetime

from memstream.memory.model import Memory

__all__ = [
    "MAX_QUERY_TERMS",
    "STOPWORDS",
    "memory_words",
    "query_terms",
    "when_text",
    "word_tokens",
]

MAX_QUERY_TERMS = 64

# RediSearch's default stopwords (the index drops them too), plus the pronouns, auxiliaries
# and question words that fill questions about the past ("what did I say about ...?"): left
# in, "I" or "did" matches most memories lexically and drowns the names and dates. They must
# go before a query is built: a union of stopwords only would match every memory.
_STOPWORD_TEXT = (
    "a is the an and are as at be but by for if in into it no not of on or such that their "
    "then there these they this to was will with "
    "i me my mine myself we us our ours you your yours he him his she her hers its them "
    "what which who whom whose when where why how do does did done doing have has had "
    "having am were been being can could would should shall might must about from "
    "so up out just than too very s t don now all any both each few more most other some "
    "own same again also ever"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split(" "))

_WORD = re.compile(r"\w+", re.UNICODE)


def word_tokens(text: str) -> list[str]:
    """The lower-case word tokens of `text`, stopwords dropped, repeats kept, in order."""
    return [token for token in _WORD.findall(text.lower()) if token not in STOPWORDS]


def query_terms(text: str) -> tuple[str, ...]:
    """The distinct word tokens of `text` (see `word_tokens`), in order, capped."""
    return tuple(dict.fromkeys(word_tokens(text)))[:MAX_QUERY_TERMS]


# English whatever the process's locale (strftime's %B is not), and a tuple lookup: every
# memory written and every candidate ranked says its date.
_MONTHS = (
    "",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def when_text(at: datetime) -> str:
    """A date as words a question would use: "8 May 2023"."""
    return f"{at.day} {_MONTHS[at.month]} {at.year}"


def memory_words(memory: Memory) -> list[str]:
    """The word tokens a memory is searched by: its content's and its date's."""
    return word_tokens(f"{memory.content} {when_text(memory.timestamp)}")
