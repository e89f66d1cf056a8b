"""MatchListenerRecord: the lifecycle row one listener run writes (startup, heartbeats, shutdown)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import peewee

from config.clock import utcnow
from models import fence
from models.badges import Badge, derive_badge
from models.base import BaseModel, UTCDateTimeField
from models.boundary import translate_database_errors
from models.db import database
from models.match import Match
from models.status import TERMINAL


class MatchListenerRecord(BaseModel):
    """One run of a match listener; open while ``ended_at`` is null."""

    id = peewee.UUIDField(primary_key=True, default=uuid.uuid4)
    match = peewee.ForeignKeyField(Match, backref="listener_records", on_delete="CASCADE")
    message_id = peewee.TextField(null=True)  # the Dramatiq message id of the start
    created_at = UTCDateTimeField(default=utcnow)
    heartbeat_at = UTCDateTimeField(default=utcnow)
    ended_at = UTCDateTimeField(null=True)
    exit_code = peewee.IntegerField(null=True)
    exit_reason = peewee.TextField(null=True)
    stopped_by = peewee.TextField(null=True)
    host = peewee.TextField(null=True)
    pid = peewee.IntegerField(null=True)
    dry_run = peewee.BooleanField(default=False)
    worker_lease = peewee.TextField(null=True)  # lease id of the worker process running it
    # Gaps of this run (reconnects, the takeover it started with, silences over two heartbeats).
    gaps = peewee.IntegerField(default=0)
    gap_seconds = peewee.FloatField(default=0.0)  # seconds without a stream, over all its gaps
    events_backfilled = peewee.IntegerField(default=0)  # merged from a resume replay or the play-by-play
    gaps_unrecovered = peewee.IntegerField(default=0)  # gaps whose backfill had not succeeded at exit
    events_unrecovered = peewee.IntegerField(default=0)  # still missing at the verification at close
    fence_token = peewee.BigIntegerField(null=True)  # the run's fencing token (models.fence); NULL: none
    traceparent = peewee.TextField(null=True)  # the run's span (config.spans; migration 0045); NULL: untraced
    # How this run took its match over (lifecycle.takeover.TakeoverPath; migration 0070) and the seconds from
    # its predecessor's close to its first live byte; NULL: not a takeover.
    takeover_path = peewee.TextField(null=True)
    takeover_seconds = peewee.FloatField(null=True)

    class Meta:
        table_name = "match_listener_records"

    def badge(self, *, now: datetime | None = None, stale_after_seconds: float) -> Badge:
        """The admin badge of this row at ``now`` (see models.badges)."""
        return derive_badge(
            ended_at=self.ended_at,
            exit_code=self.exit_code,
            heartbeat_at=self.heartbeat_at,
            now=now or utcnow(),
            stale_after_seconds=stale_after_seconds,
            stopped_by=self.stopped_by,
        )


class RecordedMatch(NamedTuple):
    """A match with a listener run (what a clone can replay)."""

    id: str  # internal Match.id
    sr_id: str
    league: str  # league name
    title: str | None
    scheduled: datetime


@translate_database_errors
def recorded_matches(limit: int = 200) -> list[RecordedMatch]:
    """The newest ``limit`` matches (by scheduled start) with a listener run."""
    rows = database.execute_sql(
        "SELECT m.id::text, m.sr_id, l.name, m.title, m.scheduled FROM matches m "
        "JOIN leagues l ON l.id = m.league_id "
        "WHERE EXISTS (SELECT 1 FROM match_listener_records r WHERE r.match_id = m.id) "
        "ORDER BY m.scheduled DESC LIMIT %s",
        (limit,),
    ).fetchall()
    return [RecordedMatch(*row) for row in rows]


@translate_database_errors
def start_and_failure_counts(success_codes: list[int]) -> tuple[int, int]:
    """(listener runs started, runs ended with an exit code outside ``success_codes``)."""
    return database.execute_sql(
        "SELECT count(*), count(*) FILTER (WHERE ended_at IS NOT NULL "
        "AND exit_code IS NOT NULL AND NOT (exit_code = ANY(%s))) FROM match_listener_records",
        (success_codes,),
    ).fetchone()


@translate_database_errors
def gap_totals() -> tuple[int, int, int]:
    """(gaps, events backfilled, events unrecovered) summed over every listener run."""
    return database.execute_sql(
        "SELECT coalesce(sum(gaps), 0), coalesce(sum(events_backfilled), 0), "
        "coalesce(sum(events_unrecovered), 0) FROM match_listener_records"
    ).fetchone()


@translate_database_errors
def takeover_histogram(buckets: Sequence[float]) -> dict[str, tuple[list[int], int, float]]:
    """Per takeover path: (cumulative count per bucket upper bound, count, sum of seconds), one query
    over the takeover rows (their partial index, migration 0070)."""
    bounds = [float(b) for b in buckets]
    filters = "".join(f", count(*) FILTER (WHERE takeover_seconds <= {b!r})" for b in bounds)
    cursor = database.execute_sql(
        "SELECT takeover_path, count(*), coalesce(sum(takeover_seconds), 0)"
        f"{filters} FROM match_listener_records WHERE takeover_path IS NOT NULL GROUP BY takeover_path"
    )
    return {path: ([int(c) for c in counts], int(n), float(total)) for path, n, total, *counts in cursor}


@translate_database_errors
def newest_runs_of_match(match_id: uuid.UUID, limit: int) -> list[MatchListenerRecord]:
    """The newest ``limit`` listener runs of match ``match_id``, newest first."""
    return list(
        MatchListenerRecord.select()
        .where(MatchListenerRecord.match == match_id)
        .order_by(MatchListenerRecord.created_at.desc())
        .limit(limit)
    )


@translate_database_errors
def write_gap_counts(record_id: str, counts: dict[str, Any]) -> bool:
    """Write a run's gap ``counts`` on its lifecycle row while the run holds its match's newest fencing
    token (models.fence); whether the row was written."""
    R = MatchListenerRecord
    return bool(R.update(**counts).where(R.id == record_id, fence.row_is_current(R)).execute())


@translate_database_errors
def runs_of_match(match_id: uuid.UUID | str) -> list[MatchListenerRecord]:
    """Every listener run of match ``match_id``, oldest first."""
    return list(
        MatchListenerRecord.select()
        .where(MatchListenerRecord.match == match_id)
        .order_by(MatchListenerRecord.created_at)
    )


@translate_database_errors
def ended_matches_without_open_run(match_ids: list[uuid.UUID]) -> list[str]:
    """Which of ``match_ids`` have a terminal status and no open listener run, sorted (one query)."""
    R = MatchListenerRecord
    still_open = R.select(R.match).where(R.ended_at.is_null())
    query = Match.select(Match.id).where(
        Match.id.in_(match_ids), Match.status.in_(sorted(TERMINAL)), Match.id.not_in(still_open)
    )
    return sorted(str(m.id) for m in query)


@translate_database_errors
def newest_open_run(match_id: uuid.UUID) -> MatchListenerRecord | None:
    """Match ``match_id``'s newest open listener run (only its id, host, pid and heartbeat read), or None."""
    R = MatchListenerRecord
    return (
        R.select(R.id, R.host, R.pid, R.heartbeat_at)
        .where(R.match == match_id, R.ended_at.is_null())
        .order_by(R.created_at.desc())
        .first()
    )


@translate_database_errors
def has_open_run(match_id: uuid.UUID) -> bool:
    """Whether match ``match_id`` has an open listener run."""
    R = MatchListenerRecord
    return R.select().where(R.match == match_id, R.ended_at.is_null()).exists()
