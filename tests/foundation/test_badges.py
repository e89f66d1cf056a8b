"""Badge derivation at its boundaries, exactly as the Admin badges table says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.badges import ENDED_BY_THE_RUN, Badge, derive_badge

NOW = datetime(2024, 5, 21, 18, 0, tzinfo=UTC)
STALE = 180.0


def badge(
    *,
    heartbeat_age: float = 0.0,
    ended: bool = False,
    exit_code: int | None = None,
    stopped_by: str | None = None,
) -> Badge:
    return derive_badge(
        ended_at=NOW if ended else None,
        exit_code=exit_code,
        heartbeat_at=NOW - timedelta(seconds=heartbeat_age),
        now=NOW,
        stale_after_seconds=STALE,
        stopped_by=stopped_by,
    )


def test_an_open_row_with_a_fresh_heartbeat_is_running():
    assert badge(heartbeat_age=5) is Badge.RUNNING


def test_a_heartbeat_exactly_at_the_stale_threshold_is_still_running():
    assert badge(heartbeat_age=STALE) is Badge.RUNNING


def test_a_heartbeat_just_past_the_stale_threshold_is_stale():
    assert badge(heartbeat_age=STALE + 0.001) is Badge.STALE


def test_a_row_closed_with_14_is_abandoned():
    assert badge(ended=True, exit_code=14, heartbeat_age=999) is Badge.ABANDONED


def test_a_row_closed_with_15_is_stopped():
    assert badge(ended=True, exit_code=15) is Badge.STOPPED
    assert badge(ended=True, exit_code=15, stopped_by="operator") is Badge.STOPPED


@pytest.mark.parametrize("code", [14, 15])
def test_a_14_or_15_the_run_reported_itself_is_ended_not_abandoned_or_stopped(code):
    assert badge(ended=True, exit_code=code, stopped_by=ENDED_BY_THE_RUN) is Badge.ENDED


@pytest.mark.parametrize("code", [None, 0, 9, 10, 11, 12, 13, 16, 1, 137])
def test_a_row_closed_with_any_other_code_is_ended(code):
    assert badge(ended=True, exit_code=code, heartbeat_age=9999) is Badge.ENDED


def test_a_closed_row_ignores_its_heartbeat_age():
    assert badge(ended=True, exit_code=0, heartbeat_age=10_000) is Badge.ENDED


LATE = 60.0


def late_badge(*, heartbeat_age: float, lease_gone: bool = False) -> Badge:
    return derive_badge(
        ended_at=None,
        exit_code=None,
        heartbeat_at=NOW - timedelta(seconds=heartbeat_age),
        now=NOW,
        stale_after_seconds=STALE,
        late_after_seconds=LATE,
        lease_gone=lease_gone,
    )


def test_a_heartbeat_older_than_two_intervals_is_late_until_it_is_stale():
    assert late_badge(heartbeat_age=LATE) is Badge.RUNNING
    assert late_badge(heartbeat_age=LATE + 0.001) is Badge.LATE
    assert late_badge(heartbeat_age=STALE) is Badge.LATE
    assert late_badge(heartbeat_age=STALE + 0.001) is Badge.STALE


def test_without_a_late_threshold_an_old_heartbeat_is_running_as_before():
    assert badge(heartbeat_age=STALE - 1) is Badge.RUNNING


def test_a_fresh_run_whose_worker_lease_is_gone_is_late_and_a_stale_one_stays_stale():
    assert late_badge(heartbeat_age=1, lease_gone=True) is Badge.LATE
    assert late_badge(heartbeat_age=STALE + 1, lease_gone=True) is Badge.STALE
