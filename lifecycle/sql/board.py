"""The listener board's readings (lifecycle.board): one query for the rows, one for the change token.

A board row comes back as a ``MatchOnBoard`` (named fields, never read by position above this
module). Every function translates its driver errors (models.boundary).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from models.boundary import translate_database_errors
from models.db import database


class MatchOnBoard(NamedTuple):
    """One board row: the match, its newest run (an open row wins over a later closed one; the run's
    fields are None without a run) and PostgreSQL's now, in ``_SELECT``'s column order."""

    match_id: str
    league: str  # league name
    sr_id: str
    status: str  # Match.status
    auto_dispatch: bool
    record_id: str | None  # the newest run's lifecycle row
    heartbeat_at: datetime | None
    ended_at: datetime | None
    exit_code: int | None
    exit_reason: str | None
    host: str | None
    pid: int | None
    worker_lease: str | None
    now: datetime  # PostgreSQL's now() of the reading
    gaps: int | None
    gap_seconds: Any  # Decimal or None
    events_backfilled: int | None
    gaps_unrecovered: int | None
    events_unrecovered: int | None
    archive_verification: Any  # the match's stored verification (a dict) or None
    archive_verified_at: datetime | None
    title: str | None
    scheduled: datetime | None
    run_started_at: datetime | None
    takeover_path: str | None
    stopped_by: str | None  # who ended the run: an operator, or models.badges.ENDED_BY_THE_RUN

    @property
    def is_open(self) -> bool:
        """Whether the newest run is an open row."""
        return self.record_id is not None and self.ended_at is None

    def same_as(self, other: MatchOnBoard) -> bool:
        """Whether two readings of the match's row agree (PostgreSQL's now() aside)."""
        return self._replace(now=None) == other._replace(now=None)


def _rows(sql: str, params: Sequence[Any]) -> list[MatchOnBoard]:
    return [MatchOnBoard(*row) for row in database.execute_sql(sql, params).fetchall()]


_SELECT = """
WITH ids AS (
  {ids}
)
SELECT m.id::text, l.name, m.sr_id, m.status, m.auto_dispatch_listener,
       r.id::text, r.heartbeat_at, r.ended_at, r.exit_code, r.exit_reason, r.host, r.pid,
       r.worker_lease, now(), r.gaps, r.gap_seconds, r.events_backfilled, r.gaps_unrecovered,
       r.events_unrecovered, m.archive_verification, m.archive_verified_at, m.title, m.scheduled,
       r.created_at, r.takeover_path, r.stopped_by
  FROM ids
  JOIN matches m ON m.id = ids.id
  JOIN leagues l ON l.id = m.league_id
  LEFT JOIN LATERAL (
    SELECT * FROM match_listener_records x
     WHERE x.match_id = m.id
     ORDER BY (x.ended_at IS NULL) DESC, x.created_at DESC
     LIMIT 1
  ) r ON TRUE
"""

_ALL_IDS = """
  SELECT DISTINCT match_id AS id FROM match_listener_records
  UNION
  SELECT unnest(%s::uuid[])
  UNION
  SELECT m.id FROM matches m JOIN leagues l ON l.id = m.league_id
   WHERE NOT m.auto_dispatch_listener AND l.enabled
     AND (m.status = ANY(%s) OR (m.status = ANY(%s) AND m.scheduled BETWEEN %s AND %s))
"""


#: One cheap reading that changes whenever the full board query could answer differently: every
#: table's row count and xmin sum (an insert, update or delete changes it), and the set of matches
#: the dispatch window holds now (time alone moves matches in and out of it).
_TOKEN = """
SELECT now(),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM match_listener_records),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM matches),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM leagues),
  (SELECT count(*) || ':' || coalesce(sum(hashtext(m.id::text)::bigint), 0)
     FROM matches m JOIN leagues l ON l.id = m.league_id
    WHERE NOT m.auto_dispatch_listener AND l.enabled
      AND (m.status = ANY(%s) OR (m.status = ANY(%s)
           AND m.scheduled BETWEEN now() - make_interval(secs => %s) AND now() + make_interval(secs => %s))))
"""


@translate_database_errors
def board_row_of_match(match_id: uuid.UUID) -> list[MatchOnBoard]:
    """The board row of match ``match_id`` (empty: no such match)."""
    return _rows(_SELECT.format(ids="SELECT %s::uuid AS id"), (match_id,))


@translate_database_errors
def board_rows_of_matches(match_ids: Sequence[str]) -> list[MatchOnBoard]:
    """The board rows of ``match_ids`` (unknown ids left out)."""
    ids = _SELECT.format(ids="SELECT DISTINCT unnest(%s::uuid[]) AS id")
    return _rows(ids, ([str(m) for m in match_ids],))


@translate_database_errors
def board_rows(
    *,
    redis_ids: list[str],
    always: list[str],
    in_window: list[str],
    window_from: datetime,
    window_to: datetime,
) -> list[MatchOnBoard]:
    """The rows of every match on the board: with a run, with Redis keys (``redis_ids``), or with
    auto-dispatch off where the dispatcher would start it (``always`` statuses, or ``in_window``
    ones scheduled between ``window_from`` and ``window_to``)."""
    params = (redis_ids, always, in_window, window_from, window_to)
    return _rows(_SELECT.format(ids=_ALL_IDS), params)


#: The Matches board's ids: every match scheduled inside the window (matches_scheduled_idx).
_WINDOW_IDS = """
  SELECT id FROM matches WHERE scheduled >= %s AND scheduled < %s
"""


#: The Matches board's change token: every table its rows and search read, count and xmin sum.
_WINDOW_TOKEN = """
SELECT now(),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM match_listener_records),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM matches),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM leagues),
  (SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) FROM teams)
"""


@translate_database_errors
def window_change_token() -> tuple[datetime, tuple[Any, ...]]:
    """(PostgreSQL's now, the Matches board's change token): see lifecycle.matches_board."""
    now, *token = database.execute_sql(_WINDOW_TOKEN).fetchone()
    return now, tuple(token)


@translate_database_errors
def window_rows(*, window_from: datetime, window_to: datetime) -> list[MatchOnBoard]:
    """The board rows of every match scheduled in [``window_from``, ``window_to``) (the Matches board)."""
    return _rows(_SELECT.format(ids=_WINDOW_IDS), (window_from, window_to))


@translate_database_errors
def team_names_by_alias() -> dict[tuple[str, str], str]:
    """(league name, team alias) -> the team's market and name ("Kansas City Royals"), for every team
    with an alias: what the Matches board's search finds a match's title by."""
    rows = database.execute_sql(
        "SELECT l.name, t.alias, concat_ws(' ', t.market, t.name) FROM teams t "
        "JOIN leagues l ON l.id = t.league_id WHERE t.alias IS NOT NULL AND t.alias <> ''"
    ).fetchall()
    return {(league, alias): name for league, alias, name in rows}


@translate_database_errors
def open_runs() -> tuple[datetime, list[tuple[datetime, str | None]]]:
    """(PostgreSQL's now, (heartbeat_at, worker lease) of every open lifecycle row)."""
    rows = database.execute_sql(
        "SELECT now(), heartbeat_at, worker_lease FROM match_listener_records WHERE ended_at IS NULL"
    ).fetchall()
    if not rows:
        return database.execute_sql("SELECT now()").fetchone()[0], []
    return rows[0][0], [(heartbeat_at, lease) for _, heartbeat_at, lease in rows]


@translate_database_errors
def database_now() -> datetime:
    """PostgreSQL's clock."""
    return database.execute_sql("SELECT now()").fetchone()[0]


@translate_database_errors
def board_change_token(
    *, always: list[str], in_window: list[str], max_age_seconds: float, window_seconds: float
) -> tuple[datetime, tuple[Any, ...]]:
    """(PostgreSQL's now, the change token): see lifecycle.board.BoardCache."""
    params = (always, in_window, max_age_seconds, window_seconds)
    now, *token = database.execute_sql(_TOKEN, params).fetchone()
    return now, tuple(token)
