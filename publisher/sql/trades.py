"""Named SQL statements on ``execution_log``'s trade claims (reported action results: ``sql/results.py``).

The functions below run them (errors translated, models.boundary); no other module of the publisher
sends SQL for trade claims.
Reported action results share the table (their queues are the action queues): every statement that
reads claims by status takes the trade queues (``queue = ANY(%s)``) so it never meets one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from models.boundary import translate_database_errors
from models.db import database

#: The columns of a claim as ``publisher.trades`` reads them.
ENTRY_COLUMNS = (
    "queue, claim_key, league_id, team, message_id, status, error, resolution, resolved_by, resolved_at, "
    "created_at, traceparent"
)

INSERT = (
    "INSERT INTO execution_log (claim_key, queue, league_id, team, message_id, body, status, result, "
    "created_at, updated_at, traceparent, created_by_key_id)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
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
    traceparent: str | None = None,
    created_by_key_id: str | None = None,
) -> None:
    """Claim ``key`` on ``queue`` (in a transaction of its own, a savepoint inside a caller's), with the
    trace context it was made in and the API key that made it; ConstraintViolation when it is claimed."""
    with database.atomic():
        database.execute_sql(
            INSERT,
            (
                key,
                queue,
                league_id,
                team,
                message_id,
                body,
                status,
                result,
                now,
                now,
                traceparent,
                created_by_key_id,
            ),
        )


@translate_database_errors
def set_claim_status(
    queue: str, key: str, *, status: str, error: str | None, at: datetime, only_claimed: bool = False
) -> bool:
    """Set the claim's status (``only_claimed``: only while it is still ``claimed``); whether it was set."""
    with database.atomic():
        cursor = database.execute_sql(
            SET_STATUS_IF_CLAIMED if only_claimed else SET_STATUS, (status, error, at, queue, key)
        )
    return bool(cursor.rowcount)


@translate_database_errors
def claim_row(queue: str, key: str) -> tuple[Any, ...] | None:
    """The claim of ``key`` on ``queue`` (ENTRY_COLUMNS), or None."""
    return database.execute_sql(SELECT_ENTRY, (queue, key)).fetchone()


@translate_database_errors
def claim_body(queue: str, key: str) -> Any:
    """The stored message body of the claim of ``key`` on ``queue`` (the claim must exist)."""
    (body,) = database.execute_sql(SELECT_BODY, (queue, key)).fetchone()
    return body


@translate_database_errors
def count_claims_with_status(queues: list[str], status: str) -> int:
    """How many claims on ``queues`` stand in ``status``."""
    return database.execute_sql(COUNT_WITH_STATUS, (queues, status)).fetchone()[0]


@translate_database_errors
def claim_counts_by_status(queues: list[str]) -> dict[str, int]:
    """Status -> how many claims on ``queues`` stand in it."""
    return dict(database.execute_sql(COUNT_BY_STATUS, (queues,)).fetchall())


@translate_database_errors
def lock_republishable_claims(queues: list[str], status: str, limit: int) -> list[tuple[Any, ...]]:
    """The oldest ``limit`` claims on ``queues`` in ``status``, locked (SKIP LOCKED) for the caller's
    transaction."""
    return database.execute_sql(CLAIM_REPUBLISHABLE, (queues, status, limit)).fetchall()


@translate_database_errors
def claims_to_reconcile_rows(
    queues: list[str], *, waiting: list[str], claimed: str, claimed_before: datetime, limit: int
) -> list[tuple[Any, ...]]:
    """The oldest ``limit`` claims on ``queues`` in a ``waiting`` status, or ``claimed`` since before
    ``claimed_before``."""
    params = (queues, waiting, claimed, claimed_before, limit)
    return database.execute_sql(SELECT_TO_RECONCILE, params).fetchall()


@translate_database_errors
def lock_claim(queue: str, key: str) -> tuple[Any, ...] | None:
    """The claim of ``key`` on ``queue`` locked FOR UPDATE (caller's transaction), or None."""
    return database.execute_sql(SELECT_ENTRY_FOR_UPDATE, (queue, key)).fetchone()


@translate_database_errors
def resolve_claim(queue: str, key: str, *, resolution: str, operator: str, at: datetime) -> None:
    """Record an operator's ``resolution`` of the claim of ``key`` on ``queue``."""
    database.execute_sql(RESOLVE, (resolution, operator, at, queue, key))
