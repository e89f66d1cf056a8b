"""Timezone-aware UTC time: the one place kickoff asks for "now" and checks incoming datetimes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from config.errors import InvalidTimeError, NaiveDatetimeError

_now: Callable[[], datetime] = lambda: datetime.now(UTC)  # noqa: E731


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime (tests may replace the source)."""
    return _now()


def set_clock(source: Callable[[], datetime] | None) -> None:
    """Replace the time source (tests freeze or move time); None restores the wall clock."""
    global _now
    _now = source if source is not None else (lambda: datetime.now(UTC))


def ensure_utc(value: datetime, *, what: str = "datetime") -> datetime:
    """Return ``value`` converted to UTC; a naive datetime is refused with NaiveDatetimeError."""
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise NaiveDatetimeError(f"{what} must be timezone-aware, got naive {value.isoformat()}")
    return value.astimezone(UTC)


def parse_iso8601(text: str, *, what: str = "time") -> datetime:
    """Parse an ISO 8601 string that carries an offset (``Z`` accepted) into aware UTC."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidTimeError(f"{what} is not an ISO 8601 time: {text!r}") from exc
    return ensure_utc(value, what=what)
