"""The store of reported action results (``execution_log`` rows keyed ``result:<tracking id>``).

Named statements with named parameters, and the functions that run them and return named rows
(publisher.results holds no SQL and reads no row by position). Errors are translated by the
runners of publisher.sql (models.boundary).
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from publisher.sql import execute, fetch_all, fetch_one

#: The action a result is reported for: league, queue, team and where it stands.
SELECT_ACTION = (
    "SELECT league_id, kind, team, status FROM activity_actions WHERE tracking_id::text = %(tracking_id)s"
)

#: A report, or a repeat that replaces it while its status is one of ``replaceable`` (``reported``, or
#: ``set_aside``: it is then ``reported`` again, its old reason gone).
UPSERT = (
    "INSERT INTO execution_log (claim_key, queue, league_id, team, message_id, body, status, result, late, "
    "created_at, updated_at, traceparent) VALUES (%(claim_key)s, %(queue)s, %(league_id)s, %(team)s, "
    "%(message_id)s, %(body)s, %(status)s, %(result)s, %(late)s, %(now)s, %(now)s, %(traceparent)s) "
    "ON CONFLICT (league_id, queue, claim_key) DO UPDATE SET body = EXCLUDED.body, status = EXCLUDED.status, "
    "error = NULL, result = EXCLUDED.result, late = EXCLUDED.late, updated_at = EXCLUDED.updated_at, "
    "traceparent = EXCLUDED.traceparent "
    "WHERE execution_log.status = ANY(%(replaceable)s) RETURNING id"
)

#: The reported results to settle, oldest first, with their action's team, status and delivery, and the
#: trace context each was reported in (else the action's).
SELECT_REPORTED_FOR_UPDATE = (
    "SELECT e.id, e.body::text, e.late, a.tracking_id::text, a.team, a.status, o.status, "
    "coalesce(e.traceparent, a.traceparent) FROM execution_log e"
    " JOIN activity_actions a ON e.claim_key = 'result:' || a.tracking_id::text LEFT JOIN outbox_messages o"
    " ON o.tracking_id = a.tracking_id WHERE e.status = %(status)s ORDER BY e.id FOR UPDATE OF e SKIP LOCKED"
)

SETTLE = (
    "UPDATE execution_log SET status = %(status)s, error = %(reason)s, late = %(late)s, updated_at = %(now)s "
    "WHERE id = %(row_id)s"
)

#: How many results are late (kept beside a settled action) and how many were set aside unsettled.
COUNT_LATE_AND_SET_ASIDE = (
    "SELECT count(*) FILTER (WHERE late), count(*) FILTER (WHERE status = %(set_aside)s) FROM execution_log "
    "WHERE claim_key LIKE 'result:%%'"
)

SELECT_STATUS = "SELECT status FROM execution_log WHERE claim_key = %(claim_key)s"

SELECT_RESULT = (
    "SELECT body::text, status, error, created_at, updated_at, late FROM execution_log "
    "WHERE claim_key = %(claim_key)s"
)


class ResultAction(NamedTuple):
    """The action a result is reported for, as SELECT_ACTION reads it."""

    league_id: str
    queue: str  # the action's kind
    team: str | None
    status: str


class ReportedResult(NamedTuple):
    """A reported result waiting to be settled, as SELECT_REPORTED_FOR_UPDATE reads it."""

    row_id: int
    body: str  # the report's JSON
    late: bool
    tracking_id: str
    team: str | None  # the action's
    action_status: str
    delivery: str | None  # the action's outbox status (None: no outbox row)
    traceparent: str | None  # the report's trace context, else the action's


class LateAndSetAside(NamedTuple):
    """How many results are late and how many were set aside unsettled."""

    late: int
    set_aside: int


class StoredResult(NamedTuple):
    """An action's reported result as SELECT_RESULT reads it."""

    body: str  # the report's JSON
    status: str  # reported | verified | failed | set_aside
    error: str | None  # why it failed or was set aside
    created_at: datetime
    updated_at: datetime
    late: bool


def action_of_result(tracking_id: str) -> ResultAction | None:
    """The action ``tracking_id`` names (a result's), or None when there is none."""
    row = fetch_one(SELECT_ACTION, {"tracking_id": str(tracking_id)})
    return None if row is None else ResultAction(*row)


def save_report(
    *,
    claim_key: str,
    action: ResultAction,
    message_id: object,
    body: str,
    status: str,
    result: str,
    late: bool,
    now: datetime,
    traceparent: str | None,
    replaceable: list[str],
) -> bool:
    """Insert a report, or replace the stored one while its status is in ``replaceable``; whether it was
    written (False: the stored result was settled)."""
    params = {
        "claim_key": claim_key,
        "queue": action.queue,
        "league_id": action.league_id,
        "team": action.team,
        "message_id": message_id,
        "body": body,
        "status": status,
        "result": result,
        "late": late,
        "now": now,
        "traceparent": traceparent,
        "replaceable": replaceable,
    }
    return fetch_one(UPSERT, params) is not None


def result_status(claim_key: str) -> str | None:
    """The status of the result stored under ``claim_key``, or None."""
    row = fetch_one(SELECT_STATUS, {"claim_key": claim_key})
    return None if row is None else str(row[0])


def reported_for_update(*, status: str) -> list[ReportedResult]:
    """Every result with ``status``, oldest first, locked (rows other passes hold are skipped)."""
    return [ReportedResult(*row) for row in fetch_all(SELECT_REPORTED_FOR_UPDATE, {"status": status})]


def settle(row_id: int, *, status: str, reason: str | None, late: bool, now: datetime) -> int:
    """Set a result's status, reason and late flag; how many rows changed."""
    return execute(SETTLE, {"status": status, "reason": reason, "late": late, "now": now, "row_id": row_id})


def count_late_and_set_aside(*, set_aside: str) -> LateAndSetAside:
    """How many results are late, and how many have status ``set_aside``."""
    row = fetch_one(COUNT_LATE_AND_SET_ASIDE, {"set_aside": set_aside})
    return LateAndSetAside(*row) if row is not None else LateAndSetAside(0, 0)


def stored_result(claim_key: str) -> StoredResult | None:
    """The result stored under ``claim_key``, or None."""
    row = fetch_one(SELECT_RESULT, {"claim_key": claim_key})
    return None if row is None else StoredResult(*row)
