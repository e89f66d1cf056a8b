"""Named SQL statements on ``execution_log``'s trade claims (reported action results: ``sql/results.py``).

A claim is one key on one queue in one league (the unique key ``(league_id, queue, claim_key)``):
every statement on one claim names all three.

The functions below run them (errors translated, models.boundary); no other module of the publisher
sends SQL for trade claims.
Reported action results share the table (their queues are the action queues): every statement that
reads claims by status takes the trade queues (``queue = ANY(%s)``) so it never meets one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

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
    "UPDATE execution_log SET status = %s, error = %s, updated_at = %s WHERE league_id = %s AND queue = %s "
    "AND claim_key = %s"
)

#: The first publish's outcome, only while the claim is still ``claimed``: an operator may have
#: reconciled it meanwhile (a claim stuck that long is listed), and that resolution stands.
SET_STATUS_IF_CLAIMED = SET_STATUS + " AND status = 'claimed'"

RESOLVE = (
    "UPDATE execution_log SET resolution = %s, resolved_by = %s, resolved_at = %s WHERE league_id = %s AND "
    "queue = %s AND claim_key = %s"
)

SELECT_ENTRY = (
    f"SELECT {ENTRY_COLUMNS} FROM execution_log WHERE league_id = %s AND queue = %s AND claim_key = %s"
)

#: The claims of one key on one queue in every league (a caller that named no league), by league.
SELECT_ENTRIES_OF_KEY = (
    f"SELECT {ENTRY_COLUMNS} FROM execution_log WHERE queue = %s AND claim_key = %s ORDER BY league_id"
)

SELECT_ENTRY_FOR_UPDATE = SELECT_ENTRY + " FOR UPDATE"

SELECT_BODY = "SELECT body FROM execution_log WHERE league_id = %s AND queue = %s AND claim_key = %s"

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


class ClaimRow(NamedTuple):
    """One claim as ENTRY_COLUMNS reads it."""

    queue: str
    claim_key: str
    league_id: str
    team: str
    message_id: Any  # uuid
    status: str
    error: str | None
    resolution: str | None
    resolved_by: str | None
    resolved_at: datetime | None
    created_at: datetime
    traceparent: str | None


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
    league_id: str,
    queue: str,
    key: str,
    *,
    status: str,
    error: str | None,
    at: datetime,
    only_claimed: bool = False,
) -> bool:
    """Set the claim's status (``only_claimed``: only while it is still ``claimed``); whether it was set."""
    with database.atomic():
        cursor = database.execute_sql(
            SET_STATUS_IF_CLAIMED if only_claimed else SET_STATUS, (status, error, at, league_id, queue, key)
        )
    return bool(cursor.rowcount)


@translate_database_errors
def claim_row(league_id: str, queue: str, key: str) -> ClaimRow | None:
    """The claim of ``key`` on ``queue`` in league ``league_id``, or None."""
    row = database.execute_sql(SELECT_ENTRY, (league_id, queue, key)).fetchone()
    return None if row is None else ClaimRow(*row)


@translate_database_errors
def claim_rows_of_key(queue: str, key: str) -> list[ClaimRow]:
    """The claims of ``key`` on ``queue`` in every league, by league."""
    return [ClaimRow(*row) for row in database.execute_sql(SELECT_ENTRIES_OF_KEY, (queue, key)).fetchall()]


@translate_database_errors
def claim_body(league_id: str, queue: str, key: str) -> Any:
    """The stored message body of the claim of ``key`` on ``queue`` in ``league_id`` (it must exist)."""
    (body,) = database.execute_sql(SELECT_BODY, (league_id, queue, key)).fetchone()
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
def lock_republishable_claims(queues: list[str], status: str, limit: int) -> list[ClaimRow]:
    """The oldest ``limit`` claims on ``queues`` in ``status``, locked (SKIP LOCKED) for the caller's
    transaction."""
    rows = database.execute_sql(CLAIM_REPUBLISHABLE, (queues, status, limit)).fetchall()
    return [ClaimRow(*row) for row in rows]


@translate_database_errors
def claims_to_reconcile_rows(
    queues: list[str], *, waiting: list[str], claimed: str, claimed_before: datetime, limit: int
) -> list[ClaimRow]:
    """The oldest ``limit`` claims on ``queues`` in a ``waiting`` status, or ``claimed`` since before
    ``claimed_before``."""
    params = (queues, waiting, claimed, claimed_before, limit)
    return [ClaimRow(*row) for row in database.execute_sql(SELECT_TO_RECONCILE, params).fetchall()]


@translate_database_errors
def lock_claim(league_id: str, queue: str, key: str) -> ClaimRow | None:
    """The claim of ``key`` on ``queue`` in ``league_id`` locked FOR UPDATE (caller's transaction), or
    None."""
    row = database.execute_sql(SELECT_ENTRY_FOR_UPDATE, (league_id, queue, key)).fetchone()
    return None if row is None else ClaimRow(*row)


@translate_database_errors
def resolve_claim(
    league_id: str, queue: str, key: str, *, resolution: str, operator: str, at: datetime
) -> None:
    """Record an operator's ``resolution`` of the claim of ``key`` on ``queue`` in ``league_id``."""
    database.execute_sql(RESOLVE, (resolution, operator, at, league_id, queue, key))
