"""The server's parsed sessions (server.sessions._Parsed): a session read again unchanged is
not parsed again, one changed by anyone (another server, a reshard's copy) is, and what is
held stays within its budget."""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.memory.ports import StoredSession
from memstream.server.session_models import MemoryMessage, WorkingMemory
from memstream.server.sessions import _Parsed, _State

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def stored(session_id: str, said: str, version: int = 1) -> StoredSession:
    """The session as a server stores it (the same arguments, the same document)."""
    message = MemoryMessage(role="user", content=said, id="m1", created_at=T0)
    memory = WorkingMemory(
        session_id=session_id,
        messages=[message],
        last_accessed=T0,
        created_at=T0,
        updated_at=T0,
    )
    return StoredSession(session_id, _State(memory=memory).document(), version)


def test_a_session_read_again_unchanged_is_the_state_parsed_before_at_its_version() -> None:
    parsed = _Parsed()
    first = parsed.state("acme", stored("s", "hello", 1))
    again = parsed.state("acme", stored("s", "hello", 2))
    assert again.memory is first.memory  # not parsed again
    assert (first.version, again.version) == (1, 2)
    assert again.memory.messages[0].content == "hello"


def test_a_session_changed_elsewhere_is_parsed_anew_and_tenants_never_share_one() -> None:
    parsed = _Parsed()
    parsed.state("acme", stored("s", "hello"))
    changed = parsed.state("acme", stored("s", "changed by another server"))
    assert changed.memory.messages[0].content == "changed by another server"
    other = parsed.state("globex", stored("s", "globex's own"))
    assert other.memory.messages[0].content == "globex's own"
    assert parsed.state("acme", stored("s", "changed by another server")).memory is changed.memory


def test_what_is_held_stays_within_its_budget() -> None:
    size = len(stored("s0", "x").document)
    parsed = _Parsed(max_chars=8 * size + 8)
    first = [parsed.state("acme", stored(f"s{n}", "x")) for n in range(10)]
    assert parsed.state("acme", stored("s9", "x")).memory is first[9].memory  # kept
    assert parsed.state("acme", stored("s0", "x")).memory is not first[0].memory  # dropped
    huge = stored("big", "y" * 2 * size)  # over an eighth of the budget: never held
    assert parsed.state("acme", huge).memory is not parsed.state("acme", huge).memory
