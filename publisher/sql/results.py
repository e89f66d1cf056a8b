"""Named SQL statements of reported action results (``execution_log`` rows keyed ``result:<tracking id>``).

The publisher runs these with ``database.execute_sql``; no other module of it writes SQL for these rows.
"""

from __future__ import annotations

#: The action a result is reported for: league, queue, team and where it stands.
SELECT_ACTION = "SELECT league_id, kind, team, status FROM activity_actions WHERE tracking_id::text = %s"

#: A report, or a repeat that replaces it while it is still ``reported`` or was ``set_aside`` (it is
#: then ``reported`` again, its old reason gone); params end with those statuses.
UPSERT = (
    "INSERT INTO execution_log (claim_key, queue, league_id, team, message_id, body, status, result, late, "
    "created_at, updated_at, traceparent) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (queue, claim_key) DO UPDATE SET body = EXCLUDED.body, status = EXCLUDED.status, "
    "error = NULL, result = EXCLUDED.result, late = EXCLUDED.late, updated_at = EXCLUDED.updated_at, "
    "traceparent = EXCLUDED.traceparent "
    "WHERE execution_log.status = ANY(%s) RETURNING id"
)

#: The reported results to settle, oldest first, with their action's team, status and delivery, and the
#: trace context each was reported in (else the action's).
SELECT_REPORTED_FOR_UPDATE = (
    "SELECT e.id, e.body::text, e.late, a.tracking_id::text, a.team, a.status, o.status, "
    "coalesce(e.traceparent, a.traceparent) FROM execution_log e"
    " JOIN activity_actions a ON e.claim_key = 'result:' || a.tracking_id::text LEFT JOIN outbox_messages o"
    " ON o.tracking_id = a.tracking_id WHERE e.status = %s ORDER BY e.id FOR UPDATE OF e SKIP LOCKED"
)

SETTLE = "UPDATE execution_log SET status = %s, error = %s, late = %s, updated_at = %s WHERE id = %s"

#: How many results are late (kept beside a settled action) and how many were set aside unsettled.
COUNT_LATE_AND_SET_ASIDE = (
    "SELECT count(*) FILTER (WHERE late), count(*) FILTER (WHERE status = %s) FROM execution_log WHERE "
    "claim_key LIKE 'result:%%'"
)

SELECT_STATUS = "SELECT status FROM execution_log WHERE claim_key = %s"

SELECT_RESULT = (
    "SELECT body::text, status, error, created_at, updated_at, late FROM execution_log WHERE claim_key = %s"
)
