"""Activity actions as callers read them, and the results the worker's verifier records."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from config.clock import utcnow
from config.errors import ActionNotFound
from models.activity import PENDING_STATUSES, ActionStatus
from models.db import database, database_errors

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


def get_action(tracking_id: str) -> ActionView:
    """Return the action with ``tracking_id``; ActionNotFound if there is none."""
    with database_errors():
        row = database.execute_sql(
            "SELECT tracking_id, league_id, kind, team, status, idempotency_key, after_tracking_id, "
            "hold_until, run_id, error, created_at FROM activity_actions WHERE tracking_id::text = %s",
            (str(tracking_id),),
        ).fetchone()
    if row is None:
        raise ActionNotFound(f"no activity action has tracking id {tracking_id}")
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


def record_result(tracking_id: str, status: ActionStatus, *, error: str | None = None) -> None:
    """Record what the worker reported for an action (running, succeeded, failed)."""
    now = utcnow()
    finished = None if status in PENDING_STATUSES else now
    with database_errors(), database.atomic():
        cursor = database.execute_sql(
            "UPDATE activity_actions SET status = %s, error = %s, updated_at = %s, "
            "finished_at = COALESCE(%s, finished_at) WHERE tracking_id::text = %s",
            (status.value, error, now, finished, str(tracking_id)),
        )
    if cursor.rowcount == 0:
        raise ActionNotFound(f"no activity action has tracking id {tracking_id}")
    logger.info("action result recorded: tracking_id=%s status=%s", tracking_id, status.value)
