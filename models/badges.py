"""The admin badge of a lifecycle row, derived exactly as the "Admin badges" table says."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from config.clock import ensure_utc

EXIT_ABANDONED = 14
EXIT_STOPPED = 15
#: ``stopped_by`` of a row whose run reported 14 or 15 itself (a body's return or SystemExit,
#: ``listener_force_exit_code``): no cleanup abandoned it and no operator stopped it, so it is Ended
#: (a counted failure), not Abandoned or Stopped. Only the lifecycle's own writes of 14 / 15 are those.
ENDED_BY_THE_RUN = "the run itself"


class Badge(StrEnum):
    """What an operator sees for one listener run."""

    RUNNING = "Running"  # open row, heartbeat no older than two heartbeat intervals
    LATE = "Late"  # open row, heartbeat older than two intervals (or its worker lease gone), not stale
    STALE = "Stale"  # open row, heartbeat older than the threshold: likely a dead worker
    ABANDONED = "Abandoned"  # closed with exit 14 by sweep/dispatch/start cleanup (or a worker shutdown)
    STOPPED = "Stopped"  # closed with exit 15 by an operator stop
    ENDED = "Ended"  # closed with any other exit (graceful end, failure, cancel), or 14 / 15 the run reported


def is_stale(heartbeat_at: datetime, *, now: datetime, stale_after_seconds: float) -> bool:
    """Whether a heartbeat is older than the threshold (exactly at the threshold is fresh)."""
    age = ensure_utc(now, what="now") - ensure_utc(heartbeat_at, what="heartbeat_at")
    return age > timedelta(seconds=stale_after_seconds)


def derive_badge(
    *,
    ended_at: datetime | None,
    exit_code: int | None,
    heartbeat_at: datetime,
    now: datetime,
    stale_after_seconds: float,
    late_after_seconds: float | None = None,
    lease_gone: bool = False,
    stopped_by: str | None = None,
) -> Badge:
    """Return the badge of a row from its end time, exit code and last heartbeat.

    ``stopped_by`` (the row's): ``ENDED_BY_THE_RUN`` makes an exit 14 or 15 Ended, as the run itself
    reported it (no cleanup or stop wrote it).

    ``late_after_seconds`` (the board passes two heartbeat intervals) turns an open row whose
    heartbeat is older than that, but not stale, Late; None never says Late. ``lease_gone``
    (the run's worker lease is known to be gone) makes a fresh open row Late too.
    """
    if ended_at is None:
        if is_stale(heartbeat_at, now=now, stale_after_seconds=stale_after_seconds):
            return Badge.STALE
        if lease_gone:
            return Badge.LATE
        if late_after_seconds is not None and is_stale(
            heartbeat_at, now=now, stale_after_seconds=late_after_seconds
        ):
            return Badge.LATE
        return Badge.RUNNING
    if stopped_by == ENDED_BY_THE_RUN:
        return Badge.ENDED
    if exit_code == EXIT_ABANDONED:
        return Badge.ABANDONED
    if exit_code == EXIT_STOPPED:
        return Badge.STOPPED
    return Badge.ENDED
