"""Named SQL statements on ``execution_log``'s trade claims (reported action results: ``sql/results.py``).

The publisher runs these with ``database.execute_sql``; no other module of it writes SQL for trade claims.
Reported action results share the table (their queues are the action queues): every statement that
reads claims by status takes the trade queues (``queue = ANY(%s)``) so it never meets one.
"""

from __future__ import annotations

from datetime import datetime

from models.boundary import translate_database_errors
from models.db import database

#: The columns of a claim as ``publisher.trades`` reads them.
ENTRY_COLUMNS = (
    "queue, claim_key, league_id, team, message_id, status, error, resolution, resolved_by, resolved_at, "
    "created_at"
)

INSERT = (
    "INSERT INTO execution_log (claim_key, queue, league_id, team, message_id, body, status, result, "
    "created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)

SET_STATUS = (
    "UPDATE execution_log SET status = %s, error = %s, updated_at = %s WHERE queue = %s AND claim_key = %s"
)

#: The first publish's outcome, only while the claim is still ``claimed``: an operator may have
#: reconciled it meanwhile (a claim stuck that long is listed), and that resolution stands.
SET_STATUS_IF_CLAIMED = SET_STATUS + " AND status = 'claimed'"

RESOLVE = (
    "UPDATE execution_log SET resolution = %s, resolved_by = %s, resolved_at = %s WHERE queue = %s AND "
    "claim_key = %s"
)

SELECT_ENTRY = f"SELECT {ENTRY_COLUMNS} FROM execution_log WHERE queue = %s AND claim_key = %s"

SELECT_ENTRY_FOR_UPDATE = SELECT_ENTRY + " FOR UPDATE"

SELECT_BODY = "SELECT body FROM execution_log WHERE queue = %s AND claim_key = %s"

CLAIM_REPUBLISHABLE = (
    f"SELECT {ENTRY_COLUMNS} FROM execution_log WHERE queue = ANY(%s) AND status = %s "
    "ORDER BY created_at, id LIMIT %s FOR UPDATE SKIP LOCKED"
)

SELECT_TO_RECONCILE = (
    f"SELECT {ENTRY_COLUMNS} FROM execution_log WHERE queue = ANY(%s) AND (status = ANY(%s) "
    "OR (status = %s AND created_at < %s)) ORDER BY created_at, id LIMIT %s"
)

COUNT_WITH_STATUS = "SELECT count(*) FROM execution_log WHERE queue = ANY(%s) AND status = %s"

COUNT_BY_STATUS = "SELECT status, count(*) FROM execution_log WHERE queue = ANY(%s) GROUP BY status"


@translate_database_errors
def insert_claim(
    *,
    key: str,
    queue: str,
    league_id: str,
    team: str,
    message_id: str,
    body: str,
    status: str,
    result: str | None,
    now: datetime,
) -> None:
    """Claim ``key`` on ``queue`` (in a transaction of its own, a savepoint inside a caller's);
    ConstraintViolation when it is claimed already."""
    with database.atomic():
        database.execute_sql(
            INSERT, (key, queue, league_id, team, message_id, body, status, result, now, now)
        )
