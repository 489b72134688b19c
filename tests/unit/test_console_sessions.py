"""The console's sign-in sessions (server/console_sessions.py): tokens, expiry, form tokens."""

from __future__ import annotations

import pytest

from memstream.errors import NotAuthenticatedError
from memstream.server.api_keys import Principal
from memstream.server.console_sessions import IDLE, LIFETIME, ConsoleSessions, check_form


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_its_principal_until_it_is_ended() -> None:
    sessions = ConsoleSessions()
    token = sessions.start(Principal("acme"), "f1")
    other = sessions.start(Principal(None), None)
    assert token != other and len(token) >= 40  # 32 random bytes, URL-safe
    assert sessions.get(token).principal == Principal("acme")
    assert sessions.get(other).principal.admin
    sessions.end(token)
    for gone in (token, None, "", "made-up"):
        with pytest.raises(NotAuthenticatedError, match="not signed in"):
            sessions.get(gone)


def test_a_session_ends_when_idle_or_too_old() -> None:
    clock = Clock()
    sessions = ConsoleSessions(clock)
    token = sessions.start(Principal("acme"), "f1")
    clock.now += IDLE - 1
    sessions.get(token)  # used: idle counts from here
    clock.now += IDLE - 1
    sessions.get(token)
    clock.now += IDLE + 1
    with pytest.raises(NotAuthenticatedError):
        sessions.get(token)
    busy, began = sessions.start(Principal("acme"), "f1"), clock.now
    while clock.now + IDLE / 2 <= began + LIFETIME:  # used often, it lives its lifetime
        clock.now += IDLE / 2
        sessions.get(busy)
    clock.now = began + LIFETIME + 1
    with pytest.raises(NotAuthenticatedError):
        sessions.get(busy)


def test_a_form_must_carry_its_sessions_token() -> None:
    sessions = ConsoleSessions()
    mine = sessions.get(sessions.start(Principal("acme"), "f1"))
    theirs = sessions.get(sessions.start(Principal("acme"), "f1"))
    check_form(mine, mine.csrf)
    for wrong in (None, "", theirs.csrf, mine.csrf[:-1]):
        with pytest.raises(NotAuthenticatedError, match="not from this console session"):
            check_form(mine, wrong)
