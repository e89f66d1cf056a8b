"""config.clock: aware UTC everywhere; naive datetimes and offset-less strings are refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from config import clock
from config.errors import InvalidTimeError, NaiveDatetimeError


def test_now_is_aware_utc() -> None:
    now = clock.utcnow()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)


def test_a_test_clock_replaces_now_until_restored() -> None:
    fixed = datetime(2024, 5, 21, 18, 0, tzinfo=UTC)
    clock.set_clock(lambda: fixed)
    try:
        assert clock.utcnow() == fixed
    finally:
        clock.set_clock(None)
    assert clock.utcnow() != fixed


def test_an_aware_time_in_another_zone_is_converted_to_utc() -> None:
    eastern = datetime(2024, 5, 21, 14, 0, tzinfo=timezone(timedelta(hours=-4)))
    converted = clock.ensure_utc(eastern)
    assert converted == datetime(2024, 5, 21, 18, 0, tzinfo=UTC) and converted.tzinfo == UTC


def test_a_naive_time_is_refused_naming_what_it_is() -> None:
    with pytest.raises(NaiveDatetimeError, match="scheduled must be timezone-aware"):
        clock.ensure_utc(datetime(2024, 5, 21, 18, 0), what="scheduled")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-21T18:00:00Z", datetime(2024, 5, 21, 18, 0, tzinfo=UTC)),
        ("2024-05-21T20:00:00+02:00", datetime(2024, 5, 21, 18, 0, tzinfo=UTC)),
        ("  2024-05-21T18:00:00.250Z ", datetime(2024, 5, 21, 18, 0, 0, 250000, tzinfo=UTC)),
    ],
)
def test_an_iso_time_with_an_offset_is_read_as_utc(text: str, expected: datetime) -> None:
    assert clock.parse_iso8601(text) == expected


def test_an_iso_time_without_an_offset_is_refused() -> None:
    with pytest.raises(NaiveDatetimeError):
        clock.parse_iso8601("2024-05-21T18:00:00")


@pytest.mark.parametrize("text", ["", "tomorrow", "2024-13-01T00:00:00Z"])
def test_a_text_that_is_no_time_is_refused_naming_what_it_is(text: str) -> None:
    with pytest.raises(InvalidTimeError, match="scheduled is not an ISO 8601 time"):
        clock.parse_iso8601(text, what="scheduled")
