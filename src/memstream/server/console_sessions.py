"""The console's sign-in sessions: who a browser acts as, without its key ever leaving the form.

A person signs in by posting a key once; the server keeps the key's `Principal` under a random
session token and the browser keeps only that token, in a cookie it never shows a script
(HttpOnly), never sends from another site (SameSite=Strict) and sends only to the console's
paths. The key itself is never stored, logged or put in a URL. Each session has its own CSRF
token, which every form that changes something carries and `check_form` compares in constant
time: a cross-site form cannot read it, and SameSite already keeps the cookie from such a post.

Sessions live in the server's process (a restart signs everyone out; behind a load balancer,
keep a browser on one server) and end after `IDLE` without a request or `LIFETIME` at most,
and at the first request after their key is revoked (the console checks the key's
fingerprint, never the key, against the key store each time).
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from memstream.errors import NotAuthenticatedError
from memstream.server.api_keys import Principal

__all__ = ["COOKIE", "IDLE", "LIFETIME", "ConsoleSession", "ConsoleSessions", "check_form"]

COOKIE = "memstream_console"
IDLE = 2 * 3600.0
LIFETIME = 12 * 3600.0
# More sessions than this and the oldest go first: a bound on what sign-ins can make the
# server hold.
_MOST = 10_000


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """One signed-in browser: who it acts as, the fingerprint of the key it signed in with
    (None: signed in without one, on a keyless server), its form token, and when it began and
    was last used (monotonic seconds)."""

    principal: Principal
    fingerprint: str | None
    csrf: str
    started: float
    used: float


class ConsoleSessions:
    """The sessions of one server process, by token."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._sessions: dict[str, ConsoleSession] = {}
        self._lock = threading.Lock()

    def start(self, principal: Principal, fingerprint: str | None) -> str:
        """A new session for `principal`, signed in with the key of `fingerprint`; its token,
        for the cookie."""
        token = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            if len(self._sessions) >= _MOST:
                oldest = min(self._sessions, key=lambda t: self._sessions[t].used)
                del self._sessions[oldest]
            self._sessions[token] = ConsoleSession(
                principal, fingerprint, secrets.token_urlsafe(32), now, now
            )
        return token

    def get(self, token: str | None) -> ConsoleSession:
        """The live session of `token`, marked used (NotAuthenticatedError: none, or it ended)."""
        now = self._clock()
        with self._lock:
            found = self._sessions.get(token) if token else None
            if token is None or found is None or self._ended(found, now):
                if token is not None and found is not None:
                    del self._sessions[token]
                raise NotAuthenticatedError("not signed in to the console, or the session ended")
            used = replace(found, used=now)
            self._sessions[token] = used
            return used

    @staticmethod
    def _ended(session: ConsoleSession, now: float) -> bool:
        return now - session.used > IDLE or now - session.started > LIFETIME

    def end(self, token: str | None) -> None:
        with self._lock:
            if token:
                self._sessions.pop(token, None)


def check_form(session: ConsoleSession, sent: str | None) -> None:
    """Refuse a form whose CSRF token is not the session's (NotAuthenticatedError)."""
    if not sent or not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        raise NotAuthenticatedError(
            "this form is not from this console session: reload the page and send it again"
        )
