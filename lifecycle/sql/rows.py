"""Lifecycle-row SQL: open rows, batch heartbeats, shutdown writes, stale abandon and operator close.

Every public function that runs a statement carries ``@translate_database_errors`` (models.boundary):
a lost connection raises DatabaseUnavailable, a missing table DatabaseNotMigrated, a broken
constraint ConstraintViolation; the condition builders (``db_now``, ``active_condition``) run none.

Every function here is one statement (or one small query) so callers never hold a connection
for long; callers decide when the connection is closed. Every lifecycle time (created, heartbeat,
ended) is written with PostgreSQL's clock and every age is judged by it, so a worker whose own
clock is off can neither look stale while alive nor keep a dead run looking alive.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import peewee

from listener.exit_codes import ExitCode
from models import fence
from models.boundary import translate_database_errors
from models.coordination import CoordinationStore
from models.db import database
from models.listener_record import MatchListenerRecord
from models.match import Match

R = MatchListenerRecord


@dataclass(frozen=True)
class ClosedRow:
    """A lifecycle row some cleanup just closed."""

    record_id: str  # MatchListenerRecord.id (also the start-lock token of its run)
    match_id: str  # internal Match.id
    heartbeat_at: datetime  # its last heartbeat
    heartbeat_age_seconds: float  # by PostgreSQL's clock (decides whether its holder can be alive)
    traceparent: str | None = None  # the run's span (config.spans): what a stop or sweep links to


def db_now() -> peewee.Node:
    """PostgreSQL's clock: the one every lifecycle time is written and judged by."""
    return peewee.fn.now()


def db_ago(seconds: float) -> peewee.Node:
    """``now() - seconds`` by PostgreSQL's clock."""
    return peewee.SQL("(now() - make_interval(secs => %s))", (float(seconds),))


def _heartbeat_age() -> peewee.Node:
    return peewee.fn.date_part("epoch", peewee.fn.now() - R.heartbeat_at).alias("heartbeat_age")


def _closed(rows: Iterable[MatchListenerRecord]) -> list[ClosedRow]:
    return [
        ClosedRow(str(r.id), str(r.match_id), r.heartbeat_at, float(r.heartbeat_age), r.traceparent)
        for r in rows
    ]


@translate_database_errors
def create_row(
    *,
    record_id: str,
    match_id: str,
    message_id: str | None,
    dry_run: bool,
    worker_lease: str | None = None,
    traceparent: str | None = None,
) -> int:
    """Write the startup row of one listener run (open, heartbeat now, its worker's lease, its span's
    ``traceparent``); return its token.

    The run's fencing token (models.fence) is taken in the same transaction: from its commit on,
    every older run of the match is refused every write.
    """
    with database.atomic():
        token = fence.take_token(match_id)
        R.insert(
            id=uuid.UUID(record_id),
            match=uuid.UUID(match_id),
            message_id=message_id,
            created_at=db_now(),
            heartbeat_at=db_now(),
            host=socket.gethostname(),
            pid=os.getpid(),
            dry_run=dry_run,
            worker_lease=worker_lease,
            fence_token=token,
            traceparent=traceparent,
        ).execute()
    return token


@translate_database_errors
def heartbeat_rows(record_ids: Sequence[str]) -> set[str]:
    """Set heartbeat_at = now on the open rows among ``record_ids`` (one UPDATE).

    Returns the ids that were updated; an id missing from the answer was closed by someone
    else (stop, sweep) or fenced (``fenced_rows``: a newer run of its match started), and its
    listener must stop.
    """
    if not record_ids:
        return set()
    query = (
        R.update(heartbeat_at=db_now())
        .where(R.id.in_([uuid.UUID(r) for r in record_ids]), R.ended_at.is_null(), fence.row_is_current(R))
        .returning(R.id)
    )
    return {str(row.id) for row in query.execute()}


@translate_database_errors
def fenced_rows(record_ids: Sequence[str]) -> set[str]:
    """The ids among ``record_ids`` whose run's fencing token is older than its match's (one query)."""
    if not record_ids:
        return set()
    query = R.select(R.id).where(R.id.in_([uuid.UUID(r) for r in record_ids]), ~fence.row_is_current(R))
    return {str(row.id) for row in query}


@translate_database_errors
def superseded_rows(record_ids: Sequence[str]) -> dict[str, bool]:
    """The ids among ``record_ids`` whose run must stop (one query): True when a newer run of its
    match took its fencing token (fenced), False when its row was closed by someone else (a reaper,
    a stop, a sweep) and no newer token was taken yet (lifecycle.fence_watch, every 0.05 s while a
    worker's liveness signal is gone: the ids go as one array parameter and the rows come back as
    tuples, so 1,000 runs cost milliseconds, not a model per row)."""
    if not record_ids:
        return {}
    fenced = R.fence_token.is_null(False) & (R.fence_token < Match.fence_token)
    query = (
        R.select(R.id, fenced)
        .join(Match, on=(Match.id == R.match))
        .where(R.id == peewee.SQL("ANY(%s::uuid[])", (list(record_ids),)), R.ended_at.is_null(False) | fenced)
        .tuples()
    )
    return {str(record_id): bool(is_fenced) for record_id, is_fenced in query}


@translate_database_errors
def close_row(record_id: str, *, exit_code: int | None, reason: str, stopped_by: str | None = None) -> bool:
    """Write the shutdown of one run unless its row is already closed or the run fenced; True when written."""
    n = (
        R.update(ended_at=db_now(), exit_code=exit_code, exit_reason=reason, stopped_by=stopped_by)
        .where(R.id == uuid.UUID(record_id), R.ended_at.is_null(), fence.row_is_current(R))
        .execute()
    )
    return bool(n)


@translate_database_errors
def recorded_exit(record_id: str) -> tuple[int | None, str | None]:
    """The exit code and reason a row was closed with (by whoever closed it)."""
    row = R.select(R.exit_code, R.exit_reason).where(R.id == uuid.UUID(record_id)).first()
    return (row.exit_code, row.exit_reason) if row else (None, None)


def _abandon(cond: peewee.Expression, *, reason: str) -> list[ClosedRow]:
    query = (
        R.update(ended_at=db_now(), exit_code=int(ExitCode.ABANDONED), exit_reason=reason)
        .where(cond)
        .returning(R.id, R.match, R.heartbeat_at, _heartbeat_age(), R.traceparent)
    )
    return _closed(query.execute())


@translate_database_errors
def abandon_stale_rows(
    *, stale_seconds: float, match_ids: Iterable[str] | None = None, reason: str = "heartbeat stale"
) -> list[ClosedRow]:
    """Close open rows whose heartbeat is older than ``stale_seconds`` as Abandoned (14).

    ``match_ids`` limits the sweep to those matches (dispatch and start); None sweeps all.
    """
    cond = R.ended_at.is_null() & (R.heartbeat_at < db_ago(stale_seconds))
    if match_ids is not None:
        ids = [uuid.UUID(str(m)) for m in match_ids]
        if not ids:
            return []
        cond &= R.match.in_(ids)
    return _abandon(cond, reason=reason)


@translate_database_errors
def open_worker_leases(match_ids: Iterable[str] | None = None) -> set[str]:
    """The distinct worker leases open rows run under (``match_ids`` None: all of them).

    One small answer (a lease per worker process), read through a partial index on open rows.
    """
    cond = R.ended_at.is_null() & R.worker_lease.is_null(False)
    if match_ids is not None:
        ids = [uuid.UUID(str(m)) for m in match_ids]
        if not ids:
            return set()
        cond &= R.match.in_(ids)
    return {lease for (lease,) in R.select(R.worker_lease).where(cond).distinct().tuples()}


@dataclass(frozen=True)
class LeasedRow:
    """A closed row that ran under a worker lease."""

    record_id: str  # MatchListenerRecord.id (its run's start-lock token)
    match_id: str
    lease: str  # the worker lease it ran under


@translate_database_errors
def recently_closed_leased_rows(*, within_seconds: float) -> list[LeasedRow]:
    """The rows closed within ``within_seconds`` under a lease.

    One range read of a partial index (migration 0020): the rows whose start lock may still be
    held by their token after they closed (a run that could not reach Redis to release it).
    """
    cond = R.ended_at.is_null(False) & (R.ended_at >= db_ago(within_seconds)) & R.worker_lease.is_null(False)
    query = R.select(R.id, R.match, R.worker_lease).where(cond).tuples()
    return [LeasedRow(str(rid), str(mid), str(lease)) for rid, mid, lease in query]


@translate_database_errors
def recently_fenced_matches_without_run(*, within_seconds: float) -> list[str]:
    """Matches whose newest row a fence or an abandon (16, 14) closed within ``within_seconds``
    under a worker lease, with no open row and no newer row.

    One range read of the partial index of migration 0020 (closed rows under a lease), each
    checked against its match's other rows by the match index.
    """
    later = R.alias("later")
    newer_or_open = later.select(peewee.SQL("1")).where(
        (later.match == R.match)
        & (later.id != R.id)
        & (later.ended_at.is_null() | (later.created_at > R.created_at))
    )
    cond = (
        R.ended_at.is_null(False)
        & (R.ended_at >= db_ago(within_seconds))
        & R.worker_lease.is_null(False)
        & R.exit_code.in_([int(ExitCode.CANCELLED), int(ExitCode.ABANDONED)])
        & ~peewee.fn.EXISTS(newer_or_open)
    )
    query = R.select(R.match).where(cond).distinct().tuples()
    return sorted(str(mid) for (mid,) in query)


@translate_database_errors
def abandon_rows_of_dead_workers(
    lease_ids: Iterable[str], *, match_ids: Iterable[str] | None = None, reason: str = "worker lease expired"
) -> list[ClosedRow]:
    """Close the open rows run under ``lease_ids`` as Abandoned (14) with ``reason``: those workers are gone
    (their leases expired, or their liveness signals ended: lifecycle.takeover's reasons)."""
    leases = sorted(set(lease_ids))
    if not leases:
        return []
    cond = R.ended_at.is_null() & R.worker_lease.in_(leases)
    if match_ids is not None:
        cond &= R.match.in_([uuid.UUID(str(m)) for m in match_ids])
    return _abandon(cond, reason=reason)


@translate_database_errors
def record_takeover(
    record_id: str, match_id: str, *, paths: Mapping[str, str], within_seconds: float
) -> tuple[str, float] | None:
    """Record on run ``record_id`` how it took its match over, at its first live byte; what it recorded.

    The predecessor is the match's row closed last (within ``within_seconds``, by PostgreSQL's clock);
    its closing reason names the path (``paths``: reason -> path), the seconds are from its close to
    now (0 when it closed after: an overlapping hand-off). None, and nothing written: not a takeover.
    """
    rid = uuid.UUID(record_id)
    since_close = peewee.SQL("EXTRACT(EPOCH FROM (now() - ended_at))")
    prev = (
        R.select(R.exit_reason, since_close)
        .where(
            (R.match == uuid.UUID(match_id))
            & (R.id != rid)
            & R.ended_at.is_null(False)
            & (R.ended_at >= db_ago(within_seconds))
        )
        .order_by(R.ended_at.desc())
        .limit(1)
        .tuples()
        .first()
    )
    if prev is None or paths.get(prev[0] or "") is None:
        return None
    path, seconds = paths[prev[0]], max(0.0, float(prev[1]))
    R.update(takeover_path=path, takeover_seconds=seconds).where(R.id == rid).execute()
    return path, seconds


@translate_database_errors
def open_run_traceparents(match_id: str) -> list[str]:
    """The traceparents of the match's open runs (what a stop links its span to)."""
    cond = (R.match == uuid.UUID(match_id)) & R.ended_at.is_null() & R.traceparent.is_null(False)
    return [tp for (tp,) in R.select(R.traceparent).where(cond).tuples()]


@translate_database_errors
def close_open_rows_for_stop(match_id: str, *, stopped_by: str) -> list[ClosedRow]:
    """Close every open row of a match with exit 15 (operator stop)."""
    query = (
        R.update(
            ended_at=db_now(),
            exit_code=int(ExitCode.STOPPED),
            exit_reason="stopped by operator",
            stopped_by=stopped_by,
        )
        .where(R.match == uuid.UUID(match_id), R.ended_at.is_null())
        .returning(R.id, R.match, R.heartbeat_at, _heartbeat_age(), R.traceparent)
    )
    return _closed(query.execute())


@translate_database_errors
def supersede_open_rows(match_id: str, *, keep: str | None = None) -> list[ClosedRow]:
    """Close every other open row of a match as Abandoned (a forced start proved none is live)."""
    cond = (R.match == uuid.UUID(match_id)) & R.ended_at.is_null()
    if keep:
        cond &= R.id != uuid.UUID(keep)
    return _abandon(cond, reason="superseded by forced start")


def active_condition(*, stale_seconds: float, active_max_age_seconds: float) -> peewee.Expression:
    """SQL condition of an active row: open, fresh heartbeat, created within the active age."""
    return (
        R.ended_at.is_null()
        & (R.heartbeat_at >= db_ago(stale_seconds))
        & (R.created_at >= db_ago(active_max_age_seconds))
    )


@translate_database_errors
def has_active_row(match_id: str, *, stale_seconds: float, active_max_age_seconds: float) -> bool:
    """Whether a match has an active lifecycle row (the start guard)."""
    cond = active_condition(stale_seconds=stale_seconds, active_max_age_seconds=active_max_age_seconds)
    return R.select().where(cond, R.match == uuid.UUID(match_id)).exists()


@translate_database_errors
def matches_with_active_rows(
    match_ids: Iterable[str], *, stale_seconds: float, active_max_age_seconds: float
) -> set[str]:
    """The subset of ``match_ids`` that still have an active row (one query)."""
    ids = [uuid.UUID(str(m)) for m in match_ids]
    if not ids:
        return set()
    cond = active_condition(stale_seconds=stale_seconds, active_max_age_seconds=active_max_age_seconds)
    query = R.select(R.match).where(cond, R.match.in_(ids)).distinct()
    return {str(r.match_id) for r in query}


@translate_database_errors
def held_by_their_open_rows(
    match_ids: Sequence[str], *, coordination: CoordinationStore, stale_seconds: float
) -> set[str]:
    """Which of ``match_ids`` have their start lock held by one of their open rows that still beats.

    One MGET of the locks and one query of the holders' rows (nothing when ``match_ids`` is empty):
    such a run is alive whatever its age, so the open-row guard keeps it.
    """
    holders = coordination.locks.start_lock_holders(match_ids)
    tokens = {}
    for match_id, token in holders.items():
        try:
            tokens[uuid.UUID(token)] = match_id
        except ValueError:
            continue  # not a run's row id: nothing to match
    if not tokens:
        return set()
    query = R.select(R.id, R.match).where(
        R.id.in_(list(tokens)), R.ended_at.is_null(), R.heartbeat_at >= db_ago(stale_seconds)
    )
    return {str(r.match_id) for r in query if tokens.get(r.id) == str(r.match_id)}
