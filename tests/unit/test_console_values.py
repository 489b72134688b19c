"""How the console reads the times its forms send and writes the sizes it shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memstream.errors import InvalidInputError
from memstream.server.console import _moment, _size


def test_a_time_without_a_zone_is_utc_and_an_empty_field_is_none() -> None:
    assert _moment("2026-12-06T09:30", "at") == datetime(2026, 12, 6, 9, 30, tzinfo=UTC)
    assert _moment(" ", "at") is None
    cork = _moment("2026-12-06T09:30:00+01:00", "at")
    assert cork is not None and cork.utcoffset() == timedelta(hours=1)
    assert cork == datetime(2026, 12, 6, 8, 30, tzinfo=UTC)


def test_a_malformed_time_names_its_field_and_the_form_wanted() -> None:
    with pytest.raises(InvalidInputError, match=r"since: not a time: 'last tuesday' \(ISO 8601"):
        _moment("last tuesday", "since")


@pytest.mark.parametrize(
    ("count", "shown"),
    [(0, "0 B"), (812, "812 B"), (1024, "1.0 KiB"), (3_500_000, "3.3 MiB"), (5 << 30, "5.0 GiB")],
)
def test_sizes_are_shown_in_the_unit_a_person_reads(count: int, shown: str) -> None:
    assert _size(count) == shown
