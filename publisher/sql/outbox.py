"""Named SQL statements on ``outbox_messages`` (save, claim, mark, drain, report), and the store
functions that run the drain's (named rows back, never tuples to unpack by position).

The publisher runs these with ``database.execute_sql``; no other module of it writes SQL for this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from config.records import json_fields
from publisher.sql import execute, fetch_all, fetch_one

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

#: The columns of ``DeadRow``, in its order.
LIST_DEAD = (
    "SELECT id, message_id::text, queue, tracking_id::text, attempts, last_error FROM outbox_messages "
    "WHERE status = 'dead' ORDER BY id DESC LIMIT %s"
)

#: The columns of ``PendingRow``, in its order.
LIST_DUE = (
    "SELECT id, message_id::text, queue, tracking_id::text, attempts, tries, next_attempt_at, last_error, "
    "created_at FROM outbox_messages WHERE status = 'pending' AND held_by IS NULL ORDER BY created_at, id "
    "LIMIT %s"
)

LATEST_DELIVERY_OF_ACTION = (
    "SELECT message_id::text, status, published_at, attempts, last_error FROM outbox_messages WHERE "
    "tracking_id::text = %(tracking_id)s ORDER BY id DESC LIMIT 1"
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


# -- the drain's statements, run here ---------------------------------------------------------


class StoredRow(NamedTuple):
    """One outbox row as ROW_COLUMNS reads it (``publisher.outbox.OutboxRow.from_db`` checks it)."""

    id: int
    message_id: str
    queue: str
    body: str
    headers: str | None
    tracking_id: str | None
    attempts: int
    expires_at: datetime | None
    tries: int


class HeldClaim(NamedTuple):
    """A pending chained claim held by its parent action (an IR move), locked for this transaction."""

    outbox_id: int
    tracking_id: Any  # uuid
    hold_until: datetime | None
    parent_status: str | None  # None: the parent action is missing


def claim_due(*, now: datetime, limit: int) -> list[StoredRow]:
    """Lock up to ``limit`` due rows that no claim holds (others' locked rows skipped), oldest due first."""
    return [StoredRow(*row) for row in fetch_all(CLAIM_DUE, (now, limit))]


def expire(row_ids: list[int], *, status: str) -> int:
    """Mark rows ``status`` (expired) before they were published."""
    return execute(EXPIRE, (status, row_ids))


def held_claims_for_update() -> list[HeldClaim]:
    """Every pending held claim with its hold and its parent's status, locked (others' skipped)."""
    return [HeldClaim(*row) for row in fetch_all(SELECT_HELD_FOR_UPDATE)]


def release_hold(outbox_id: int, *, now: datetime) -> int:
    """Let a held claim go out: no holder, due ``now``."""
    return execute(RELEASE_HOLD, (now, outbox_id))


def set_status(outbox_id: int, *, status: str, reason: str | None) -> int:
    """Set a row's status and last error."""
    return execute(SET_STATUS, (status, reason, outbox_id))


def pull_backoff_in(*, now: datetime) -> int:
    """Make every pending row that no claim holds due ``now``; how many were waiting out a backoff."""
    return execute(PULL_BACKOFF_IN, (now, now))


class DeadDelivery(NamedTuple):
    """An action's outbox row the broker refused to the last attempt."""

    outbox_id: int
    last_error: str | None


def dead_delivery_of_action(tracking_id: str) -> DeadDelivery | None:
    """The newest dead outbox row of action ``tracking_id``, or None."""
    row = fetch_one(SELECT_DEAD_OF_ACTION, (tracking_id,))
    return None if row is None else DeadDelivery(*row)


# -- saving, marking, reporting and reviving rows (publisher.outbox) ---------------------------


def insert(
    *,
    message_id: str,
    queue: str,
    body: str,
    headers: str,
    tracking_id: str | None,
    held_by: str | None,
    next_attempt_at: datetime,
    expires_at: datetime | None,
    created_at: datetime,
) -> int:
    """Insert one pending row; its id."""
    params = (message_id, queue, body, headers, tracking_id, held_by, next_attempt_at, expires_at, created_at)
    row = fetch_one(INSERT, params)
    assert row is not None  # INSERT ... RETURNING always returns its row
    return int(row[0])


def mark_published(row_ids: list[int], *, status: str, now: datetime) -> int:
    """Mark rows ``status`` (published) at ``now``, a try each, no last error."""
    return execute(MARK_PUBLISHED, (status, now, row_ids))


def mark_failed(
    row_id: int, *, status: str, attempts: int, tries: int, next_attempt_at: datetime, error: str
) -> int:
    """Record a failed publish of one row: its status, counts, next attempt and error."""
    return execute(MARK_FAILED, (status, attempts, tries, next_attempt_at, error, row_id))


def mark_unavailable(
    row_ids: list[int], *, error: str, now: datetime, base_seconds: float, max_seconds: float
) -> int:
    """A try each for rows the broker could not take, next attempt after their capped backoff."""
    return execute(MARK_UNAVAILABLE, (error, now, base_seconds, max_seconds, row_ids))


def claim_many(row_ids: list[int], *, status: str, now: datetime) -> list[StoredRow]:
    """Lock those of ``row_ids`` still ``status`` (pending), not held, not expired (others' skipped)."""
    return [StoredRow(*row) for row in fetch_all(CLAIM_MANY, (row_ids, status, now))]


def revive(row_id: int, *, now: datetime) -> int:
    """Make a dead row pending again with a fresh attempt budget, due ``now``."""
    return execute(REVIVE, (now, row_id))


class HeldAndOldest(NamedTuple):
    """How many pending rows a claim holds, and when the oldest pending row no claim holds was made."""

    held: int
    oldest_due_created_at: datetime | None


@dataclass(frozen=True)
class DeadRow:
    """A dead outbox row, as `kickoff outbox status` lists it."""

    id: int
    message_id: str
    queue: str
    tracking_id: str | None
    attempts: int
    last_error: str | None

    as_json = json_fields


@dataclass(frozen=True)
class PendingRow:
    """One of the oldest pending rows, as `kickoff outbox status` lists it: when it is tried next."""

    id: int
    message_id: str
    queue: str
    tracking_id: str | None
    attempts: int
    tries: int
    next_attempt_at: datetime
    last_error: str | None
    created_at: datetime

    as_json = json_fields


class DeadWithAction(NamedTuple):
    """A dead row (locked) with its action's status and keys; the action's fields None without one."""

    outbox_id: int
    tracking_id: Any  # uuid
    status: str | None
    idempotency_key: str | None
    released_key: str | None
    league_id: str | None
    kind: str | None


def due_by_queue() -> dict[str, int]:
    """Pending rows no claim holds, by queue."""
    return {str(queue): int(n) for queue, n in fetch_all(COUNT_DUE_BY_QUEUE)}


def held_and_oldest_due() -> HeldAndOldest:
    row = fetch_one(COUNT_HELD_AND_OLDEST_DUE)
    assert row is not None  # an aggregate always returns its row
    return HeldAndOldest(*row)


def count_dead() -> int:
    row = fetch_one(COUNT_DEAD)
    assert row is not None  # an aggregate always returns its row
    return int(row[0])


def list_dead(limit: int) -> list[DeadRow]:
    """The ``limit`` newest dead rows."""
    return [DeadRow(*row) for row in fetch_all(LIST_DEAD, (limit,))]


def list_due(limit: int) -> list[PendingRow]:
    """The ``limit`` oldest pending rows no claim holds."""
    return [PendingRow(*row) for row in fetch_all(LIST_DUE, (limit,))]


def dead_for_update(row_ids: list[int] | None) -> list[DeadWithAction]:
    """Every dead row (or those among ``row_ids``) with its action, locked, oldest first."""
    return [DeadWithAction(*row) for row in fetch_all(SELECT_DEAD_FOR_UPDATE, (row_ids, row_ids))]


# -- a trigger's save (publisher.trigger_saves) -------------------------------------------------


def insert_many(columns: list[list[Any]]) -> dict[str, int]:
    """Insert pending rows, one list per column in INSERT's order; tracking id -> outbox id."""
    return {str(tracking_id): int(row_id) for row_id, tracking_id in fetch_all(INSERT_MANY, columns)}


def status_of(row_id: int) -> str | None:
    """The row's status, or None when there is no such row."""
    row = fetch_one(SELECT_STATUS, (row_id,))
    return None if row is None else str(row[0])


class FirstDelivery(NamedTuple):
    """The first outbox row of an action, as a duplicate request sees it."""

    outbox_id: int
    status: str
    held: bool
    expires_at: datetime | None


def first_delivery_of_action(tracking_id: str) -> FirstDelivery | None:
    """The action's first outbox row (caller's transaction), or None."""
    row = fetch_one(SELECT_FIRST_OF_ACTION, (tracking_id,))
    return None if row is None else FirstDelivery(*row)


class LatestDelivery(NamedTuple):
    """An action's newest outbox row, as LATEST_DELIVERY_OF_ACTION reads it."""

    message_id: str
    status: str
    published_at: datetime | None
    attempts: int
    last_error: str | None


def latest_delivery_of_action(tracking_id: str) -> LatestDelivery | None:
    """The newest outbox row of the action with ``tracking_id``, or None (never sent to the outbox)."""
    row = fetch_one(LATEST_DELIVERY_OF_ACTION, {"tracking_id": str(tracking_id)})
    return None if row is None else LatestDelivery(*row)
