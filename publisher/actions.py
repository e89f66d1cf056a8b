"""Activity actions as callers read them, and the results the worker's verifier records."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from config.clock import utcnow
from config.errors import ActionNotFound, TriggerConflictError, TriggerValidationError
from models.activity import PENDING_STATUSES, ActionStatus
from models.boundary import transaction
from publisher.sql import actions as action_sql
from publisher.sql import execute, fetch_one

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ActionView:
    """One activity action: what `kickoff trigger show` prints."""

    tracking_id: str
    league_id: str
    kind: str
    team: str | None
    status: str
    idempotency_key: str | None
    after_tracking_id: str | None
    hold_until: datetime | None
    run_id: str | None
    error: str | None
    created_at: datetime


def action_row(statement: str, tracking_id: str) -> tuple[Any, ...]:
    """The one row ``statement`` (an action_sql SELECT by tracking id) returns; ActionNotFound if none."""
    row = fetch_one(statement, (str(tracking_id),))
    if row is None:
        raise ActionNotFound(f"no activity action has tracking id {tracking_id}")
    return row


def get_action(tracking_id: str) -> ActionView:
    """Return the action with ``tracking_id``; ActionNotFound if there is none."""
    row = action_row(action_sql.SELECT_VIEW, tracking_id)
    return ActionView(
        tracking_id=str(row[0]),
        league_id=row[1],
        kind=row[2],
        team=row[3],
        status=row[4],
        idempotency_key=row[5],
        after_tracking_id=None if row[6] is None else str(row[6]),
        hold_until=row[7],
        run_id=row[8],
        error=row[9],
        created_at=row[10],
    )


#: What a worker may report: it is acting on the action, or its verified outcome.
RESULT_STATUSES: frozenset[ActionStatus] = frozenset(
    {ActionStatus.RUNNING, ActionStatus.SUCCEEDED, ActionStatus.FAILED}
)

#: The statuses a worker's report may move an action out of (besides repeating its own status).
REPORTABLE_FROM: frozenset[ActionStatus] = PENDING_STATUSES


def record_result(tracking_id: str, status: ActionStatus, *, error: str | None = None) -> None:
    """Record what the worker reported for an action (running, succeeded, failed).

    Only a pending action (queued, delivered, running) moves; repeating the status it already
    has is a no-op success. Anything else is refused before a write: a status a worker does not
    report is TriggerValidationError, a finished action (succeeded, failed, skipped) asked to move
    TriggerConflictError naming its status.
    """
    if status not in RESULT_STATUSES:
        allowed = ", ".join(sorted(s.value for s in RESULT_STATUSES))
        raise TriggerValidationError("status", f"a worker reports {allowed}, not {status.value}")
    now = utcnow()
    finished = None if status in PENDING_STATUSES else now
    sources = sorted({s.value for s in REPORTABLE_FROM} | {status.value})
    with transaction():
        params = (status.value, error, now, finished, str(tracking_id), sources)
        changed = execute(action_sql.RECORD_RESULT, params)
    if changed == 0:
        current = get_action(tracking_id).status  # ActionNotFound when there is none
        raise TriggerConflictError(
            f"action {tracking_id} is {current}: a worker result cannot change it to {status.value}"
        )
    logger.info("action result recorded: tracking_id=%s status=%s", tracking_id, status.value)
