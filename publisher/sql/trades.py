"""Named SQL statements on ``execution_log`` (trade claims and reported action results).

The publisher runs these with ``database.execute_sql``; no other module of it writes SQL for this table.
"""

from __future__ import annotations

#: The columns of a claim as ``publisher.trades`` reads them.
ENTRY_COLUMNS = (
    "queue, claim_key, league_id, team, message_id, status, error, resolution, resolved_by, resolved_at, "
    "created_at"
)

INSERT = (
    "INSERT INTO execution_log (claim_key, queue, league_id, team, message_id, body, status, result, "
    "created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)

SETTLE = "UPDATE execution_log SET status = %s, error = %s, updated_at = %s WHERE id = %s"

UPSERT_RESULT = (
    INSERT + " ON CONFLICT (queue, claim_key) DO UPDATE SET body = EXCLUDED.body, result = EXCLUDED.result, "
    "updated_at = EXCLUDED.updated_at WHERE execution_log.status = %s RETURNING id"
)

SELECT_REPORTED_FOR_UPDATE = (
    "SELECT e.id, e.body, a.tracking_id::text, a.team, o.status FROM execution_log e JOIN "
    "activity_actions a ON e.claim_key = 'result:' || a.tracking_id::text LEFT JOIN outbox_messages o ON "
    "o.tracking_id = a.tracking_id WHERE e.status = %s ORDER BY e.id FOR UPDATE OF e SKIP LOCKED"
)

SELECT_RESULT = "SELECT body, status, error, created_at, updated_at FROM execution_log WHERE claim_key = %s"

SET_STATUS = (
    "UPDATE execution_log SET status = %s, error = %s, updated_at = %s WHERE queue = %s AND claim_key = %s"
)

RESOLVE = (
    "UPDATE execution_log SET resolution = %s, resolved_by = %s, resolved_at = %s WHERE queue = %s AND "
    "claim_key = %s"
)

SELECT_ENTRY = f"SELECT {ENTRY_COLUMNS} FROM execution_log WHERE queue = %s AND claim_key = %s"

SELECT_ENTRY_FOR_UPDATE = SELECT_ENTRY + " FOR UPDATE"

SELECT_BODY = "SELECT body FROM execution_log WHERE queue = %s AND claim_key = %s"

CLAIM_REPUBLISHABLE = (
    f"SELECT {ENTRY_COLUMNS} FROM execution_log WHERE status = %s "
    "ORDER BY created_at, id LIMIT %s FOR UPDATE SKIP LOCKED"
)

SELECT_TO_RECONCILE = (
    f"SELECT {ENTRY_COLUMNS} FROM execution_log WHERE status = ANY(%s) "
    "OR (status = %s AND created_at < %s) ORDER BY created_at, id LIMIT %s"
)

COUNT_WITH_STATUS = "SELECT count(*) FROM execution_log WHERE status = %s"

COUNT_BY_STATUS = "SELECT status, count(*) FROM execution_log WHERE queue = ANY(%s) GROUP BY status"
