"""Moments as memstream reads them: a time given without a zone is UTC (as every page,
command and API shows times), and its one text form is ISO 8601."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["as_utc", "parse_moment"]


def as_utc(at: datetime) -> datetime:
    """`at`, read as UTC when it has no zone (a zone it has is kept)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def parse_moment(raw: str) -> datetime:
    """An ISO 8601 time (`as_utc`); ValueError naming the text when it is none."""
    try:
        return as_utc(datetime.fromisoformat(raw.strip()))
    except ValueError:
        raise ValueError(f"not an ISO-8601 time: {raw!r}") from None
