"""Lifecycle-row SQL: open rows, batch heartbeats, shutdown writes, stale abandon and operator close.

Every function here is one statement (or one small query) so callers never hold a connection
for long; callers decide when the connection is closed.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import peewee

from config.clock import utcnow
from listener.exit_codes import ExitCode
from models.db import database_errors
from models.listener_record import MatchListenerRecord

R = MatchListenerRecord


@dataclass(frozen=True)
class ClosedRow:
    """A lifecycle row some cleanup just closed."""

    record_id: str  # MatchListenerRecord.id (also the start-lock token of its run)
    match_id: str  # internal Match.id
    heartbeat_at: datetime  # its last heartbeat (decides whether its holder can still be alive)


def create_row(*, record_id: str, match_id: str, message_id: str | None, dry_run: bool) -> None:
    """Write the startup row of one listener run (open, heartbeat now)."""
    now = utcnow()
    with database_errors():
        R.create(
            id=uuid.UUID(record_id),
            match=uuid.UUID(match_id),
            message_id=message_id,
            created_at=now,
            heartbeat_at=now,
            host=socket.gethostname(),
            pid=os.getpid(),
            dry_run=dry_run,
        )


def heartbeat_rows(record_ids: Sequence[str]) -> set[str]:
    """Set heartbeat_at = now on the open rows among ``record_ids`` (one UPDATE).

    Returns the ids that were updated; an id missing from the answer was closed by someone
    else (stop, sweep) and its listener must stop.
    """
    if not record_ids:
        return set()
    with database_errors():
        query = (
            R.update(heartbeat_at=utcnow())
            .where(R.id.in_([uuid.UUID(r) for r in record_ids]), R.ended_at.is_null())
            .returning(R.id)
        )
        return {str(row.id) for row in query.execute()}


def close_row(record_id: str, *, exit_code: int | None, reason: str, stopped_by: str | None = None) -> bool:
    """Write the shutdown of one run unless its row is already closed; True when written."""
    with database_errors():
        n = (
            R.update(ended_at=utcnow(), exit_code=exit_code, exit_reason=reason, stopped_by=stopped_by)
            .where(R.id == uuid.UUID(record_id), R.ended_at.is_null())
            .execute()
        )
    return bool(n)


def recorded_exit(record_id: str) -> tuple[int | None, str | None]:
    """The exit code and reason a row was closed with (by whoever closed it)."""
    with database_errors():
        row = R.select(R.exit_code, R.exit_reason).where(R.id == uuid.UUID(record_id)).first()
    return (row.exit_code, row.exit_reason) if row else (None, None)


def _stale_before(stale_seconds: float, now: datetime) -> datetime:
    return now - timedelta(seconds=stale_seconds)


def abandon_stale_rows(
    *, stale_seconds: float, match_ids: Iterable[str] | None = None, reason: str = "heartbeat stale"
) -> list[ClosedRow]:
    """Close open rows whose heartbeat is older than ``stale_seconds`` as Abandoned (14).

    ``match_ids`` limits the sweep to those matches (dispatch and start); None sweeps all.
    """
    now = utcnow()
    cond = R.ended_at.is_null() & (R.heartbeat_at < _stale_before(stale_seconds, now))
    if match_ids is not None:
        ids = [uuid.UUID(str(m)) for m in match_ids]
        if not ids:
            return []
        cond &= R.match.in_(ids)
    with database_errors():
        query = (
            R.update(ended_at=now, exit_code=int(ExitCode.ABANDONED), exit_reason=reason)
            .where(cond)
            .returning(R.id, R.match, R.heartbeat_at)
        )
        return [ClosedRow(str(r.id), str(r.match_id), r.heartbeat_at) for r in query.execute()]


def close_open_rows_for_stop(match_id: str, *, stopped_by: str) -> list[ClosedRow]:
    """Close every open row of a match with exit 15 (operator stop)."""
    now = utcnow()
    with database_errors():
        open_rows = list(
            R.select(R.id, R.heartbeat_at).where(R.match == uuid.UUID(match_id), R.ended_at.is_null())
        )
        closed: list[ClosedRow] = []
        for row in open_rows:
            n = (
                R.update(
                    ended_at=now,
                    exit_code=int(ExitCode.STOPPED),
                    exit_reason="stopped by operator",
                    stopped_by=stopped_by,
                )
                .where(R.id == row.id, R.ended_at.is_null())
                .execute()
            )
            if n:
                closed.append(ClosedRow(str(row.id), match_id, row.heartbeat_at))
    return closed


def supersede_open_rows(match_id: str, *, keep: str | None = None) -> list[ClosedRow]:
    """Close every other open row of a match as Abandoned (a forced start proved none is live)."""
    now = utcnow()
    cond = (R.match == uuid.UUID(match_id)) & R.ended_at.is_null()
    if keep:
        cond &= R.id != uuid.UUID(keep)
    with database_errors():
        query = (
            R.update(
                ended_at=now, exit_code=int(ExitCode.ABANDONED), exit_reason="superseded by forced start"
            )
            .where(cond)
            .returning(R.id, R.match, R.heartbeat_at)
        )
        return [ClosedRow(str(r.id), str(r.match_id), r.heartbeat_at) for r in query.execute()]


def active_condition(
    *, stale_seconds: float, active_max_age_seconds: float, now: datetime
) -> peewee.Expression:
    """SQL condition of an active row: open, fresh heartbeat, created within the active age."""
    return (
        R.ended_at.is_null()
        & (R.heartbeat_at >= _stale_before(stale_seconds, now))
        & (R.created_at >= now - timedelta(seconds=active_max_age_seconds))
    )


def has_active_row(match_id: str, *, stale_seconds: float, active_max_age_seconds: float) -> bool:
    """Whether a match has an active lifecycle row (the start guard)."""
    now = utcnow()
    cond = active_condition(
        stale_seconds=stale_seconds, active_max_age_seconds=active_max_age_seconds, now=now
    )
    with database_errors():
        return R.select().where(cond, R.match == uuid.UUID(match_id)).exists()


def matches_with_active_rows(
    match_ids: Iterable[str], *, stale_seconds: float, active_max_age_seconds: float
) -> set[str]:
    """The subset of ``match_ids`` that still have an active row (one query)."""
    ids = [uuid.UUID(str(m)) for m in match_ids]
    if not ids:
        return set()
    now = utcnow()
    cond = active_condition(
        stale_seconds=stale_seconds, active_max_age_seconds=active_max_age_seconds, now=now
    )
    with database_errors():
        query = R.select(R.match).where(cond, R.match.in_(ids)).distinct()
        return {str(r.match_id) for r in query}
