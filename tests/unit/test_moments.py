"""Times as memstream reads them: no zone is UTC, a zone given is kept, ISO 8601 only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memstream.memory.moments import as_utc, parse_moment


def test_a_time_without_a_zone_is_utc_and_a_zone_given_is_kept() -> None:
    assert as_utc(datetime(2026, 12, 6, 9, 30)) == datetime(2026, 12, 6, 9, 30, tzinfo=UTC)
    cork = datetime(2026, 12, 6, 9, 30, tzinfo=timezone(timedelta(hours=1)))
    assert as_utc(cork) is cork


def test_iso_text_is_parsed_and_anything_else_named() -> None:
    assert parse_moment(" 2026-12-06T09:30 ") == datetime(2026, 12, 6, 9, 30, tzinfo=UTC)
    with pytest.raises(ValueError, match=r"not an ISO-8601 time: 'last tuesday'"):
        parse_moment("last tuesday")
