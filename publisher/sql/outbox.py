"""Named SQL statements on ``outbox_messages`` (save, claim, mark, drain, report).

The publisher runs these with ``database.execute_sql``; no other module of it writes SQL for this table.
"""

from __future__ import annotations

#: The columns of an outbox row as ``publisher.outbox.OutboxRow.from_db`` reads them.
ROW_COLUMNS = (
    "id, message_id::text, queue, body::text, headers::text, tracking_id::text, attempts, expires_at, tries"
)

PULL_BACKOFF_IN = (
    "UPDATE outbox_messages SET next_attempt_at = %s WHERE status = 'pending' AND held_by IS NULL AND "
    "next_attempt_at > %s"
)

SET_STATUS = "UPDATE outbox_messages SET status = %s, last_error = %s WHERE id = %s"

EXPIRE = "UPDATE outbox_messages SET status = %s, last_error = 'expired before publish' WHERE id = ANY(%s)"

SELECT_HELD_FOR_UPDATE = (
    "SELECT o.id, o.tracking_id, a.hold_until, p.status FROM outbox_messages o JOIN activity_actions a ON"
    " a.tracking_id = o.tracking_id LEFT JOIN activity_actions p ON p.tracking_id = o.held_by WHERE "
    "o.status = 'pending' AND o.held_by IS NOT NULL ORDER BY o.id FOR UPDATE OF o SKIP LOCKED"
)

RELEASE_HOLD = "UPDATE outbox_messages SET held_by = NULL, next_attempt_at = %s WHERE id = %s"

CLAIM_DUE = (
    f"SELECT {ROW_COLUMNS} FROM outbox_messages "
    "WHERE status = 'pending' AND held_by IS NULL AND next_attempt_at <= %s "
    "ORDER BY next_attempt_at, id LIMIT %s FOR UPDATE SKIP LOCKED"
)

INSERT = (
    "INSERT INTO outbox_messages (message_id, queue, body, headers, tracking_id, held_by, "
    "next_attempt_at, expires_at, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id"
)

MARK_PUBLISHED = (
    "UPDATE outbox_messages SET status = %s, published_at = %s, tries = tries + 1, last_error = NULL "
    "WHERE id = ANY(%s)"
)

MARK_FAILED = (
    "UPDATE outbox_messages SET status = %s, attempts = %s, tries = %s, next_attempt_at = %s, last_error "
    "= %s WHERE id = %s"
)

MARK_UNAVAILABLE = (
    "UPDATE outbox_messages SET tries = tries + 1, last_error = %s, next_attempt_at = %s + "
    "make_interval(secs => LEAST(%s * power(2, LEAST(tries, 40)), %s)) WHERE id = ANY(%s)"
)

CLAIM_MANY = (
    f"SELECT {ROW_COLUMNS} FROM outbox_messages WHERE id = ANY(%s) AND status = %s AND held_by IS NULL "
    "AND (expires_at IS NULL OR expires_at > %s) ORDER BY id FOR UPDATE SKIP LOCKED"
)

REVIVE = "UPDATE outbox_messages SET status = 'pending', attempts = 0, next_attempt_at = %s WHERE id = %s"

COUNT_HELD_AND_OLDEST_DUE = (
    "SELECT count(*) FILTER (WHERE held_by IS NOT NULL), min(created_at) FILTER (WHERE held_by IS NULL) "
    "FROM outbox_messages WHERE status = 'pending'"
)

SELECT_DEAD_FOR_UPDATE = (
    "SELECT o.id, a.tracking_id, a.status, a.idempotency_key, a.released_key, a.league_id, a.kind FROM "
    "outbox_messages o LEFT JOIN activity_actions a ON a.tracking_id = o.tracking_id WHERE o.status = "
    "'dead' AND (%s::bigint[] IS NULL OR o.id = ANY(%s::bigint[])) ORDER BY o.id FOR UPDATE OF o"
)  # params: ids, ids (NULL: every dead row)

COUNT_DUE_BY_QUEUE = (
    "SELECT queue, count(*) FROM outbox_messages WHERE status = 'pending' AND held_by IS NULL GROUP BY "
    "queue ORDER BY queue"
)

COUNT_DEAD = "SELECT count(*) FROM outbox_messages WHERE status = 'dead'"

#: The columns of ``publisher.outbox.DeadRow``, in its order.
LIST_DEAD = (
    "SELECT id, message_id::text, queue, tracking_id::text, attempts, last_error FROM outbox_messages "
    "WHERE status = 'dead' ORDER BY id DESC LIMIT %s"
)

#: The columns of ``publisher.outbox.PendingRow``, in its order.
LIST_DUE = (
    "SELECT id, message_id::text, queue, tracking_id::text, attempts, tries, next_attempt_at, last_error, "
    "created_at FROM outbox_messages WHERE status = 'pending' AND held_by IS NULL ORDER BY created_at, id "
    "LIMIT %s"
)

LATEST_DELIVERY_OF_ACTION = (
    "SELECT message_id::text, status, published_at, attempts, last_error FROM outbox_messages WHERE "
    "tracking_id::text = %s ORDER BY id DESC LIMIT 1"
)

SELECT_FIRST_OF_ACTION = (
    "SELECT id, status, held_by IS NOT NULL, expires_at FROM outbox_messages WHERE tracking_id = %s ORDER"
    " BY id LIMIT 1"
)

SELECT_STATUS = "SELECT status FROM outbox_messages WHERE id = %s"

SELECT_DEAD_OF_ACTION = (
    "SELECT id, last_error FROM outbox_messages WHERE tracking_id::text = %s AND status = 'dead' ORDER BY id"
    " DESC LIMIT 1"
)

#: INSERT for many rows at once: one array per column, in INSERT's column order; (id, tracking id) back.
INSERT_MANY = (
    "INSERT INTO outbox_messages (message_id, queue, body, headers, tracking_id, held_by, "
    "next_attempt_at, expires_at, created_at) SELECT * FROM unnest(%s::uuid[], %s::text[], %s::jsonb[], "
    "%s::jsonb[], %s::uuid[], %s::uuid[], %s::timestamptz[], %s::timestamptz[], %s::timestamptz[]) "
    "RETURNING id, tracking_id::text"
)
