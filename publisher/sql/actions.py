"""Named SQL statements on ``activity_actions`` (triggers, results, chains, the outbox's action updates).

The publisher runs these with ``database.execute_sql``; no other module of it writes SQL for this table.
Functions here run a statement sequence and translate its driver errors (models.boundary).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from models.boundary import translate_database_refusals
from models.db import database
from publisher.sql import execute, fetch_all, fetch_one

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

#: Actions in one of ``statuses`` delivered before ``published_before`` with no result reported.
SELECT_UNREPORTED_SINCE = (
    "SELECT a.tracking_id::text FROM activity_actions a JOIN outbox_messages o ON o.tracking_id = "
    "a.tracking_id AND o.status = 'published' WHERE a.status = ANY(%(statuses)s) AND o.published_at < "
    "%(published_before)s AND NOT EXISTS (SELECT 1 FROM execution_log e WHERE e.claim_key = 'result:' || "
    "a.tracking_id::text)"
)

SELECT_STATE = (
    "SELECT a.tracking_id::text, a.league_id, a.kind, a.team, a.status, a.error, a.created_at, a.finished_at,"
    " a.run_id, a.created_by_key_id::text, k.name, a.traceparent FROM activity_actions a LEFT JOIN api_keys k"
    " ON k.id ="
    " a.created_by_key_id WHERE a.tracking_id::text = %(tracking_id)s"
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


class ParentAction(NamedTuple):
    """A chain's parent action, as SELECT_PARENT_FOR_SHARE reads it."""

    kind: str
    league_id: str
    team: str | None
    status: str
    request: Any  # its JSON request


@translate_database_refusals
def parent_action_row(tracking_id: str, *, timeout_ms: int) -> ParentAction | None:
    """The chain parent, locked FOR SHARE, or None.

    Reads within ``timeout_ms`` of lock wait and of statement time (this transaction only, then the
    defaults again, also inside a caller's transaction); any refusal or timeout raises DatabaseRefused
    or DatabaseUnavailable.
    """
    with database.atomic():
        database.execute_sql(SET_LOCK_TIMEOUT, (timeout_ms,))
        database.execute_sql(SET_STATEMENT_TIMEOUT, (timeout_ms,))
        row = database.execute_sql(SELECT_PARENT_FOR_SHARE, (tracking_id,)).fetchone()
        database.execute_sql(RESET_TIMEOUTS)
    return None if row is None else ParentAction(*row)


def finish_releasing_key(tracking_id: str, *, status: str, reason: str, now: datetime) -> int:
    """Finish an action with ``status`` and ``reason`` and release its key (a fresh request may queue
    a new action)."""
    return execute(FINISH_RELEASING_KEY, (status, reason, now, now, tracking_id))


class ActionRow(NamedTuple):
    """One activity action as SELECT_VIEW reads it."""

    tracking_id: Any  # uuid
    league_id: str
    kind: str
    team: str | None
    status: str
    idempotency_key: str | None
    after_tracking_id: Any  # uuid or None
    hold_until: datetime | None
    run_id: str | None
    error: str | None
    created_at: datetime


def league_of_action(tracking_id: str) -> str | None:
    """The fantasy league id of the action with ``tracking_id``, or None when there is none."""
    row = fetch_one(SELECT_QUEUE_OF, (str(tracking_id),))
    return None if row is None else str(ActionQueue(*row).league_id)


class ActionQueue(NamedTuple):
    """The queue of an action, as SELECT_QUEUE_OF reads it."""

    league_id: str
    kind: str
    team: str | None


class ActionCreator(NamedTuple):
    """Who created an action: its API key's id (None: created without a key, e.g. from the CLI)."""

    key_id: str | None


def action_creator(tracking_id: str) -> ActionCreator | None:
    """Who created the action with ``tracking_id``, or None when there is no such action."""
    row = fetch_one(SELECT_CREATOR, (str(tracking_id),))
    return None if row is None else ActionCreator(*row)


def read_action(tracking_id: str) -> ActionRow | None:
    """The action with ``tracking_id``, or None."""
    row = fetch_one(SELECT_VIEW, (str(tracking_id),))
    return None if row is None else ActionRow(*row)


def record_result(
    tracking_id: str,
    *,
    status: str,
    error: str | None,
    now: datetime,
    finished: datetime | None,
    sources: list[str],
) -> int:
    """Move the action to ``status`` (with ``error``) if its status is one of ``sources``; how many moved."""
    return execute(RECORD_RESULT, (status, error, now, finished, str(tracking_id), sources))


def pick_taken(*, league_id: str, kind: str, pick_number: int, status: str) -> bool:
    """Whether an action of ``kind`` in ``league_id`` with ``status`` (succeeded) took ``pick_number``."""
    return fetch_one(PICK_TAKEN, (league_id, kind, status, pick_number)) is not None


class KeyHolder(NamedTuple):
    """The action that holds an idempotency key: its status and when it was created."""

    status: str
    created_at: datetime


def key_holder(*, league_id: str, kind: str, key: str) -> KeyHolder | None:
    """The action of ``kind`` in ``league_id`` whose idempotency key is ``key``, or None."""
    row = fetch_one(SELECT_BY_KEY, (league_id, kind, key))
    return None if row is None else KeyHolder(*row)


def mark_delivered(tracking_ids: list[str], *, status: str, from_status: str, now: datetime) -> int:
    """Move the actions among ``tracking_ids`` that are ``from_status`` (queued) to ``status`` (delivered)."""
    return execute(MARK_DELIVERED, (status, now, tracking_ids, from_status))


def fail_queued(tracking_id: str, *, status: str, error: str, now: datetime) -> int:
    """Finish a queued action with ``status`` (failed) and ``error``."""
    return execute(FAIL_QUEUED, (status, error, now, now, tracking_id, "queued"))


def key_held(*, league_id: str, kind: str, key: str) -> bool:
    """Whether an action of ``kind`` in ``league_id`` holds idempotency key ``key``."""
    return fetch_one(KEY_HELD, (league_id, kind, key)) is not None


def requeue_taking_key_back(tracking_id: str, *, status: str, now: datetime) -> int:
    """Make a failed action ``status`` (queued) again, taking its released key back."""
    return execute(REQUEUE_TAKING_KEY_BACK, (status, now, tracking_id))


def insert_many(columns: list[list[Any]]) -> set[str]:
    """Insert actions, one list per column in INSERT's order, skipping those whose key is held; the
    tracking ids inserted."""
    return {str(row[0]) for row in fetch_all(INSERT_MANY, columns)}


def insert_one(values: Sequence[Any]) -> bool:
    """Insert one action (INSERT's column order) unless its key is held; whether it was inserted."""
    return fetch_one(INSERT, tuple(values)) is not None


class KeyAction(NamedTuple):
    """The action holding an idempotency key, locked FOR UPDATE."""

    tracking_id: Any  # uuid
    status: str
    created_at: datetime


def key_action_for_update(*, league_id: str, kind: str, key: str | None) -> KeyAction | None:
    """The action of ``kind`` in ``league_id`` holding ``key``, locked; None when none holds it."""
    row = fetch_one(SELECT_BY_KEY_FOR_UPDATE, (league_id, kind, key))
    return None if row is None else KeyAction(*row)


def release_key(tracking_id: str, *, now: datetime) -> int:
    """Move the action's key to ``released_key``: a new action may take it."""
    return execute(RELEASE_KEY, (now, tracking_id))


def unreported_since(*, statuses: list[str], published_before: datetime) -> list[str]:
    """Tracking ids of the actions in ``statuses`` delivered before ``published_before`` that no
    result was reported for."""
    params = {"statuses": statuses, "published_before": published_before}
    return [str(row[0]) for row in fetch_all(SELECT_UNREPORTED_SINCE, params)]


class ActionState(NamedTuple):
    """An action with who created it and its trace context, as SELECT_STATE reads it."""

    tracking_id: str
    league_id: str
    queue: str  # the action's kind
    team: str | None
    status: str
    error: str | None
    created_at: datetime
    finished_at: datetime | None
    run_id: str | None
    creator_key_id: str | None  # None: created without an API key
    creator_name: str | None
    traceparent: str | None


def action_state(tracking_id: str) -> ActionState | None:
    """The action with ``tracking_id`` and its creator, or None."""
    row = fetch_one(SELECT_STATE, {"tracking_id": str(tracking_id)})
    return None if row is None else ActionState(*row)
