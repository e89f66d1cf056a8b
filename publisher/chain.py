"""Chained claims: check the IR move a waiver claim waits for (after_tracking_id)."""

from __future__ import annotations

import logging

from config.errors import DatabaseRefused, DatabaseUnavailable
from config.settings import KickoffSettings
from models.activity import ActionStatus
from publisher.errors import TriggerReferenceNotFound, TriggerUnavailableError, TriggerValidationError
from publisher.queues import LINEUP_UPDATES
from publisher.sql import actions as action_sql
from publisher.validation import is_ir_swap

logger = logging.getLogger(__name__)


def check_parent(
    after_tracking_id: str, *, league_id: str, team: str, settings: KickoffSettings
) -> ActionStatus:
    """Return the parent's status if a claim may wait for it; refuse the ``after_tracking_id`` field if not.

    The parent must exist, be a lineup action of the same league and team, contain an ir entry
    and not be failed. A parent that cannot be read (database error, lock wait past
    ACTIVITY_PARENT_READ_TIMEOUT_SECONDS) raises TriggerUnavailableError: retry, nothing is queued.
    """
    timeout_ms = max(int(settings.activity_parent_read_timeout_seconds * 1000), 1)
    try:
        parent = action_sql.parent_action_row(after_tracking_id, timeout_ms=timeout_ms)
    except (DatabaseUnavailable, DatabaseRefused) as exc:
        logger.warning("cannot read parent action: tracking_id=%s: %s", after_tracking_id, exc)
        raise TriggerUnavailableError(
            f"cannot read parent action {after_tracking_id}; nothing was queued, retry"
        ) from exc
    if parent is None:
        raise TriggerReferenceNotFound("after_tracking_id", f"no action has tracking id {after_tracking_id}")
    if parent.kind != LINEUP_UPDATES or parent.league_id != league_id:
        raise TriggerValidationError(
            "after_tracking_id", "the parent must be a lineup action of the same league"
        )
    if parent.team != team:
        raise TriggerValidationError(
            "after_tracking_id", f"the parent belongs to team {parent.team}, not {team}"
        )
    if not any(is_ir_swap(s) for s in (parent.request or {}).get("swaps", [])):
        raise TriggerValidationError("after_tracking_id", "the parent contains no ir entry")
    if parent.status == ActionStatus.FAILED:
        raise TriggerValidationError("after_tracking_id", "the parent IR move failed")
    return ActionStatus(parent.status)
