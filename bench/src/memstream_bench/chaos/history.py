"""What a chaos run's workload did and saw, and the checker that reads it against the memory.

Every write carries a token no other text holds, and every text a tenant writes carries that
tenant's marker, so the memory can be checked without trusting its ids: a write is found by its
token, a leak by a foreign marker. The workload logs each operation here as it is answered;
`check` then compares the log with the tenants' memories after convergence.

What each outcome promises: an acknowledged write is in its tenant's memory exactly once; one
whose answer never came (an error, a timeout) may be there once or not at all, never twice; an
acknowledged forget leaves nothing of the memory, and an erased tenant has no memory at all.
What the workload saw while it ran counts too: a recall or search that showed another
tenant's marker, or a memory after its forget or erasure was seen to be done.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["History", "Kind", "Outcome", "check", "marker", "markers_in", "shown", "token"]

_MARKER = re.compile(r"⟦(t\d{3})⟧")


def marker(tenant_label: str) -> str:
    """The mark every text of a tenant carries (labels are `t000`, `t001`...)."""
    return f"⟦{tenant_label}⟧"


def markers_in(text: str) -> set[str]:
    return set(_MARKER.findall(text))


def token(kind: str, number: int) -> str:
    """A write's unique token: no token is part of another (fixed width, closed)."""
    return f"#{kind}{number:07d}#"


class Kind(StrEnum):
    TURN = "turn"  # an agent turn through the hook: the user's words and the answer
    MEMORY = "memory"  # a long-term memory written through the HTTP API
    SESSION = "session"  # a working-memory session put through the HTTP API


@dataclass(frozen=True, slots=True)
class Outcome:
    """One operation's answer: at (monotonic), how long it took, whether it succeeded."""

    op: str
    at: float
    seconds: float
    ok: bool


@dataclass(slots=True)
class History:
    """The workload's log, shared by its threads."""

    writes: dict[str, tuple[str, Kind, bool]] = field(default_factory=dict)  # token: tenant...
    forgets: dict[str, tuple[str, bool]] = field(default_factory=dict)  # token: tenant, acked
    erased: dict[str, float] = field(default_factory=dict)  # tenant: when its erasure returned
    sessions: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # acked puts
    outcomes: list[Outcome] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)  # what the workload saw that must not be
    failures: Counter[tuple[str, str]] = field(default_factory=Counter)  # (op, why): how many
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wrote(self, tenant: str, tokens: Sequence[str], kind: Kind, acked: bool) -> None:
        with self._lock:
            for t in tokens:
                self.writes[t] = (tenant, kind, acked)

    def forgot(self, tenant: str, memory_token: str, acked: bool) -> None:
        with self._lock:
            self.forgets[memory_token] = (tenant, acked)

    def erased_tenant(self, tenant: str) -> None:
        with self._lock:
            self.erased[tenant] = time.monotonic()

    def put_session(self, tenant: str, session: str, texts: Sequence[str]) -> None:
        with self._lock:
            self.sessions[session] = (tenant, tuple(texts))

    def answered(self, op: str, started: float, ok: bool, reason: str = "") -> None:
        """`op`, started at `started`, answered now; `reason` says why it failed."""
        now = time.monotonic()
        with self._lock:
            self.outcomes.append(Outcome(op, started, now - started, ok))
            if not ok:
                self.failures[(op, reason or "unknown")] += 1

    def saw(self, defect: str) -> None:
        with self._lock:
            self.seen.append(defect)

    def acked(self, kind: Kind | None = None) -> int:
        with self._lock:
            return sum(1 for _, k, ok in self.writes.values() if ok and kind in (None, k))


def check(
    history: History, memories: Mapping[str, Iterable[str]], labels: Mapping[str, str]
) -> list[str]:
    """Every defect of the run: what the workload saw, and each tenant's memory texts
    (`memories`, converged) against what was written, forgotten and erased. `labels` maps a
    tenant to the label in its marker."""
    defects = list(history.seen)
    counts: Counter[str] = Counter()
    tokens = set(history.writes)
    for tenant, texts in memories.items():
        own = labels[tenant]
        for text in texts:
            foreign = markers_in(text) - {own}
            if foreign:
                defects.append(f"tenant {tenant} holds a memory of {sorted(foreign)}: {text!r}")
            for found in _tokens(text) & tokens:
                counts[found] += 1
                if history.writes[found][0] != tenant:
                    defects.append(f"{found} of {history.writes[found][0]} is in {tenant}'s memory")
    for written, (tenant, kind, acked) in sorted(history.writes.items()):
        n = counts[written]
        if tenant in history.erased:
            if n:
                defects.append(f"{kind} {written} of erased tenant {tenant} is still there")
        elif written in history.forgets:
            # A forget never answered may or may not have happened: once at most, then.
            if n > (0 if history.forgets[written][1] else 1):
                defects.append(f"{kind} {written} of {tenant} was forgotten and is there {n}x")
        elif n > 1:
            defects.append(f"{kind} {written} of {tenant} is there {n} times")
        elif acked and n == 0:
            defects.append(f"{kind} {written} of {tenant} was acknowledged and is lost")
    return defects


def shown(
    text: str,
    tenant: str,
    label: str,
    *,
    asked_at: float,
    erased_at: float | None,
    forgotten: Iterable[tuple[str, float | None]],
) -> list[str]:
    """What is wrong with `text` shown to `tenant` (marker `label`) by a read asked at
    `asked_at`: another tenant's marker; anything, once the tenant's erasure had returned; a
    forgotten token (with when a read first found it gone, None: not yet) once it was gone."""
    defects = []
    foreign = markers_in(text) - {label}
    if foreign:
        defects.append(f"for {tenant} showed {sorted(foreign)}'s memory: {text[:200]!r}")
    if erased_at is not None and erased_at < asked_at:
        defects.append(f"for erased {tenant} showed {text[:200]!r}")
    for written, gone_at in forgotten:
        if gone_at is not None and gone_at < asked_at and written in text:
            defects.append(f"for {tenant} showed forgotten {written}, gone before it was asked")
    return defects


_TOKEN = re.compile(r"#[a-z]+\d{7}#")


def _tokens(text: str) -> set[str]:
    return set(_TOKEN.findall(text))
