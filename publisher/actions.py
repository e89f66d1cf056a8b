"""Activity actions as callers read them, and the results the worker's verifier records."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from config.clock import utcnow
from models.activity import PENDING_STATUSES, ActionStatus
from models.boundary import transaction
from publisher.errors import ActionNotFound, TriggerConflictError, TriggerValidationError
from publisher.sql import actions as action_sql

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


def action_not_found(tracking_id: str) -> ActionNotFound:
    """The error of a tracking id no action has: also what a key limited to leagues is answered for
    another league's action (the same words, so the answer does not tell that it exists)."""
    return ActionNotFound(f"no activity action has tracking id {tracking_id}")


def creator_key_of(tracking_id: str) -> str | None:
    """The id of the API key that created the action (None: none did); ActionNotFound if there is none."""
    creator = action_sql.action_creator(tracking_id)
    if creator is None:
        raise action_not_found(tracking_id)
    return creator.key_id


def get_action(tracking_id: str) -> ActionView:
    """Return the action with ``tracking_id``; ActionNotFound if there is none."""
    row = action_sql.read_action(tracking_id)
    if row is None:
        raise action_not_found(tracking_id)
    return ActionView(
        tracking_id=str(row.tracking_id),
        league_id=row.league_id,
        kind=row.kind,
        team=row.team,
        status=row.status,
        idempotency_key=row.idempotency_key,
        after_tracking_id=None if row.after_tracking_id is None else str(row.after_tracking_id),
        hold_until=row.hold_until,
        run_id=row.run_id,
        error=row.error,
        created_at=row.created_at,
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
        changed = action_sql.record_result(
            tracking_id, status=status.value, error=error, now=now, finished=finished, sources=sources
        )
    if changed == 0:
        current = get_action(tracking_id).status  # ActionNotFound when there is none
        raise TriggerConflictError(
            f"action {tracking_id} is {current}: a worker result cannot change it to {status.value}"
        )
    logger.info("action result recorded: tracking_id=%s status=%s", tracking_id, status.value)
