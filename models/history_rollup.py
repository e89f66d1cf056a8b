"""The history rollup's derivations: the series it reads from PostgreSQL tables, minute by minute.

Each derivation is one INSERT ... SELECT that (re)writes the minutes of a span from the table
that is their honest source, so running it twice, or over minutes it wrote before, gives the same
points: takeovers and listener ends from ``match_listener_records``, publishes from
``outbox_messages.published_at``, job runs and their mean duration from ``run_log``. The
snapshots (outbox depth here, listeners by badge from the board) are written for the current
minute only. The rollup writes ``history_points`` alone; it reads the other tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from models.boundary import translate_database_errors
from models.db import database

#: The marker series the rollup writes each run (its last minute is where the next run starts).
ROLLUP_MARKER = "_rollup"

_UPSERT = " ON CONFLICT (series, minute, key) DO UPDATE SET value = EXCLUDED.value"

_LISTENER_ENDS = """
INSERT INTO history_points (series, key, minute, value)
SELECT 'listener_ends',
       CASE WHEN r.exit_code = 14 THEN 'Abandoned'
            WHEN r.exit_code = 15 THEN 'Stopped'
            WHEN r.exit_code IS NULL OR r.exit_code = ANY(%s) THEN 'Ended'
            ELSE 'Failed' END,
       date_trunc('minute', r.ended_at), count(*)
  FROM match_listener_records r
 WHERE r.ended_at >= %s AND r.ended_at < %s
 GROUP BY 2, 3
"""

_TAKEOVERS = """
INSERT INTO history_points (series, key, minute, value)
SELECT 'takeovers', '', date_trunc('minute', r.created_at), count(*)
  FROM match_listener_records r
 WHERE r.created_at >= %s AND r.created_at < %s
   AND (SELECT p.exit_code FROM match_listener_records p
         WHERE p.match_id = r.match_id AND p.created_at < r.created_at
         ORDER BY p.created_at DESC LIMIT 1) = 14
 GROUP BY 3
"""

_PUBLISHED = """
INSERT INTO history_points (series, key, minute, value)
SELECT 'outbox_published', queue, date_trunc('minute', published_at), count(*)
  FROM outbox_messages
 WHERE published_at >= %s AND published_at < %s
 GROUP BY 2, 3
"""

_JOB_RUNS = """
INSERT INTO history_points (series, key, minute, value)
SELECT 'job_runs', job || ' ' || status, date_trunc('minute', ended_at), count(*)
  FROM run_log
 WHERE ended_at >= %s AND ended_at < %s
 GROUP BY 2, 3
"""

_JOB_SECONDS = """
INSERT INTO history_points (series, key, minute, value)
SELECT 'job_run_seconds', job, date_trunc('minute', ended_at), avg(duration_seconds)
  FROM run_log
 WHERE ended_at >= %s AND ended_at < %s AND duration_seconds IS NOT NULL
 GROUP BY 2, 3
"""

#: The derived series, each with its statement (its parameters: the span, after any of its own).
DERIVED = {
    "listener_ends": _LISTENER_ENDS,
    "takeovers": _TAKEOVERS,
    "outbox_published": _PUBLISHED,
    "job_runs": _JOB_RUNS,
    "job_run_seconds": _JOB_SECONDS,
}


@translate_database_errors
def last_rollup_minute() -> datetime | None:
    """The minute the last rollup ran in (None: never, or pruned)."""
    return database.execute_sql(
        "SELECT max(minute) FROM history_points WHERE series = %s", (ROLLUP_MARKER,)
    ).fetchone()[0]


@translate_database_errors
def derive_minutes(start: datetime, end: datetime, *, success_codes: Sequence[int], at: datetime) -> int:
    """(Re)write every derived series' minutes in [``start``, ``end``) and mark the rollup at minute
    ``at``, in one transaction; the number of points written. A minute that has no row in a source
    keeps no point (a counter's missing minute reads 0)."""
    written = 0
    with database.atomic():
        # the span's old points first: a source row deleted since (a cascade) must not stay counted
        database.execute_sql(
            "DELETE FROM history_points WHERE series = ANY(%s) AND minute >= %s AND minute < %s",
            (list(DERIVED), start, end),
        )
        for series, statement in DERIVED.items():
            params = ((list(success_codes),) if series == "listener_ends" else ()) + (start, end)
            written += database.execute_sql(statement + _UPSERT, params).rowcount
        database.execute_sql(
            "INSERT INTO history_points (series, key, minute, value) VALUES (%s, '', %s, 1)" + _UPSERT,
            (ROLLUP_MARKER, at),
        )
    return written


@translate_database_errors
def outbox_depth_by_queue() -> dict[str, int]:
    """Pending outbox rows by queue (a queue without one left out)."""
    rows = database.execute_sql(
        "SELECT queue, count(*) FROM outbox_messages WHERE status = 'pending' GROUP BY queue"
    ).fetchall()
    return {queue: int(n) for queue, n in rows}
