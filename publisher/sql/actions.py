"""Named SQL statements on ``activity_actions`` (triggers, results, chains, the outbox's action updates).

The publisher runs these with ``database.execute_sql``; no other module of it writes SQL for this table.
Functions here run a statement sequence and translate its driver errors (models.boundary).
"""

from __future__ import annotations

from typing import Any

from models.boundary import translate_database_refusals
from models.db import database

RECORD_RESULT = (
    "UPDATE activity_actions SET status = %s, error = %s, updated_at = %s, finished_at = COALESCE(%s, "
    "finished_at) WHERE tracking_id::text = %s AND status = ANY(%s)"
)

SELECT_VIEW = (
    "SELECT tracking_id, league_id, kind, team, status, idempotency_key, after_tracking_id, hold_until, "
    "run_id, error, created_at FROM activity_actions WHERE tracking_id::text = %s"
)

SET_LOCK_TIMEOUT = "SET LOCAL lock_timeout = %s"  # milliseconds, this transaction only

SET_STATEMENT_TIMEOUT = "SET LOCAL statement_timeout = %s"  # milliseconds, this transaction only

#: Back to the session's timeouts: a savepoint's SET LOCAL would otherwise last to the end of the
#: enclosing transaction.
RESET_TIMEOUTS = "SET LOCAL lock_timeout TO DEFAULT; SET LOCAL statement_timeout TO DEFAULT"

SELECT_PARENT_FOR_SHARE = (
    "SELECT kind, league_id, team, status, request FROM activity_actions WHERE tracking_id = %s FOR SHARE"
)

FINISH_RELEASING_KEY = (
    "UPDATE activity_actions SET status = %s, error = %s, updated_at = %s, finished_at = %s, released_key"
    " = COALESCE(idempotency_key, released_key), idempotency_key = NULL WHERE tracking_id = %s"
)

MARK_DELIVERED = (
    "UPDATE activity_actions SET status = %s, updated_at = %s WHERE tracking_id = ANY(%s::uuid[]) AND "
    "status = %s"
)

FAIL_QUEUED = (
    "UPDATE activity_actions SET status = %s, error = %s, updated_at = %s, finished_at = %s WHERE "
    "tracking_id = %s AND status = %s"
)

REQUEUE_TAKING_KEY_BACK = (
    "UPDATE activity_actions SET status = %s, error = NULL, finished_at = NULL, updated_at = %s, "
    "idempotency_key = COALESCE(idempotency_key, released_key), released_key = CASE WHEN idempotency_key "
    "IS NULL THEN NULL ELSE released_key END WHERE tracking_id = %s"
)

KEY_HELD = "SELECT 1 FROM activity_actions WHERE league_id = %s AND kind = %s AND idempotency_key = %s"

SELECT_QUEUE_OF = "SELECT league_id, kind, team FROM activity_actions WHERE tracking_id::text = %s"

SELECT_UNREPORTED_SINCE = (
    "SELECT a.tracking_id::text FROM activity_actions a JOIN outbox_messages o ON o.tracking_id = "
    "a.tracking_id AND o.status = 'published' WHERE a.status IN (%s, %s) AND o.published_at < %s AND NOT "
    "EXISTS (SELECT 1 FROM execution_log e WHERE e.claim_key = 'result:' || a.tracking_id::text)"
)

SELECT_STATE = (
    "SELECT a.tracking_id::text, a.league_id, a.kind, a.team, a.status, a.error, a.created_at, a.finished_at,"
    " a.run_id, a.created_by_key_id::text, k.name, a.traceparent FROM activity_actions a LEFT JOIN api_keys k"
    " ON k.id ="
    " a.created_by_key_id WHERE a.tracking_id::text = %s"
)

SELECT_CREATOR = "SELECT created_by_key_id::text FROM activity_actions WHERE tracking_id::text = %s"

INSERT = (
    "INSERT INTO activity_actions (tracking_id, league_id, kind, idempotency_key, team, status, request, "
    "decision_inputs, after_tracking_id, hold_until, run_id, traceparent, created_at, updated_at, "
    "created_by_key_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (league_id, kind, idempotency_key) DO NOTHING RETURNING id"
)

RELEASE_KEY = (
    "UPDATE activity_actions SET released_key = idempotency_key, idempotency_key = NULL, updated_at = %s "
    "WHERE tracking_id = %s"
)

PICK_TAKEN = (
    "SELECT 1 FROM activity_actions WHERE league_id = %s AND kind = %s AND status = %s AND "
    "(request->>'pick_number')::int = %s LIMIT 1"
)

SELECT_BY_KEY = (
    "SELECT status, created_at FROM activity_actions WHERE league_id = %s AND kind = %s AND "
    "idempotency_key = %s"
)

SELECT_BY_KEY_FOR_UPDATE = (
    "SELECT tracking_id, status, created_at FROM activity_actions WHERE league_id = %s AND kind = %s AND "
    "idempotency_key = %s FOR UPDATE"
)

#: INSERT for many actions at once: one array per column, in INSERT's column order; the rows
#: whose key is held are skipped, the others' tracking ids returned.
INSERT_MANY = (
    "INSERT INTO activity_actions (tracking_id, league_id, kind, idempotency_key, team, status, request, "
    "decision_inputs, after_tracking_id, hold_until, run_id, traceparent, created_at, updated_at, "
    "created_by_key_id) SELECT * FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::text[], "
    "%s::text[], %s::jsonb[], %s::jsonb[], %s::uuid[], %s::timestamptz[], %s::text[], %s::text[], "
    "%s::timestamptz[], %s::timestamptz[], %s::uuid[]) ON CONFLICT (league_id, kind, idempotency_key) "
    "DO NOTHING RETURNING tracking_id::text"
)


@translate_database_refusals
def parent_action_row(tracking_id: str, *, timeout_ms: int) -> tuple[Any, ...] | None:
    """The chain parent's (kind, league_id, team, status, request), locked FOR SHARE, or None.

    Reads within ``timeout_ms`` of lock wait and of statement time (this transaction only, then the
    defaults again, also inside a caller's transaction); any refusal or timeout raises DatabaseRefused
    or DatabaseUnavailable.
    """
    with database.atomic():
        database.execute_sql(SET_LOCK_TIMEOUT, (timeout_ms,))
        database.execute_sql(SET_STATEMENT_TIMEOUT, (timeout_ms,))
        row = database.execute_sql(SELECT_PARENT_FOR_SHARE, (tracking_id,)).fetchone()
        database.execute_sql(RESET_TIMEOUTS)
    return row
