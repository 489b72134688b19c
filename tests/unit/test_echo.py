"""Echo control's test of an answer against what its turn was shown."""

from __future__ import annotations

import pytest

from memstream.memory.echo import restates

SHOWN = (
    "### What the user told about themselves\n"
    "- [2026-12-01, user] My locker number is 417 and my sister lives in Porto.\n"
    "- [2026-12-01, user] I prefer window seats on long flights."
)


@pytest.mark.parametrize(
    ("answer", "echo"),
    [
        ("You told me your locker number is 417.", True),
        ("Your sister lives in Porto.", True),
        ("Yes: window seats on long flights, as you prefer.", True),
        ("Your locker is 417; the gym closes at ten tonight, bring a padlock.", False),
        ("I booked an aisle seat on the Tuesday train to Lisbon.", False),
        ("Okay.", False),  # no content words: nothing restated
        ("", False),
    ],
)
def test_an_answer_is_an_echo_only_when_its_content_words_are_what_it_was_shown(
    answer: str, echo: bool
) -> None:
    assert restates(answer, SHOWN) is echo


def test_nothing_shown_means_no_echo() -> None:
    assert restates("My locker number is 417.", "") is False
