"""The dispatch selection's query (lifecycle.dispatch_selection.find_candidates): the matches needing
a listener.

One query for a tick of any size; errors translated here (models.boundary).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import peewee

from lifecycle.sql import rows
from models.boundary import translate_database_errors
from models.league import League
from models.listener_record import MatchListenerRecord
from models.match import SRSIM_UNSERVED, Match
from models.status import DISPATCH_ALWAYS, DISPATCH_IN_WINDOW


class DispatchableMatch(NamedTuple):
    """One match the dispatch selection takes (lifecycle.dispatch_selection.find_candidates)."""

    match_id: str
    has_stale: bool  # it has an open row whose heartbeat is stale
    old_beating: bool  # it has an open row older than the active age that still beats
    stored: Any  # its stored listener settings, None when they are {}


@translate_database_errors
def dispatchable_matches(
    *,
    now: datetime,
    within_minutes: int,
    is_test: bool | None,
    active_max_age_seconds: float,
    stale_seconds: float,
    match_ids: list[str] | None,
) -> list[DispatchableMatch]:
    """Every match lifecycle.dispatch_selection.find_candidates takes, by start time: see there."""
    R = MatchListenerRecord
    open_recent = R.select(R.id).where(
        R.match == Match.id,
        rows.active_condition(stale_seconds=stale_seconds, active_max_age_seconds=active_max_age_seconds),
    )
    stale_open = R.select(R.id).where(
        R.match == Match.id, R.ended_at.is_null(), R.heartbeat_at < rows.db_ago(stale_seconds)
    )
    old_beating = R.select(R.id).where(
        R.match == Match.id,
        R.ended_at.is_null(),
        R.heartbeat_at >= rows.db_ago(stale_seconds),
        R.created_at < rows.db_ago(active_max_age_seconds),
    )
    window = Match.scheduled.between(
        now - timedelta(seconds=active_max_age_seconds), now + timedelta(minutes=within_minutes)
    )
    cond = (
        League.enabled
        & Match.auto_dispatch_listener
        & (
            Match.status.in_(sorted(DISPATCH_ALWAYS))
            | (Match.status.in_(sorted(DISPATCH_IN_WINDOW)) & window)
        )
        & ~peewee.fn.EXISTS(open_recent)
        & ~Match.listener_start_settings.has_key(SRSIM_UNSERVED)
    )
    if is_test is not None:
        cond &= Match.is_test == is_test
    if match_ids is not None:
        cond &= Match.id.in_([uuid.UUID(m) for m in match_ids])
    query = (
        Match.select(
            Match.id.cast("text"),
            peewee.fn.EXISTS(stale_open).alias("has_stale"),
            peewee.fn.EXISTS(old_beating).alias("has_old_beating"),
            # NULL for the usual {}: only matches with stored settings carry them back.
            peewee.fn.NULLIF(Match.listener_start_settings, peewee.SQL("'{}'::jsonb")),
        )
        .join(League)
        .where(cond)
        .order_by(Match.scheduled, Match.id)
        .tuples()
    )
    return [DispatchableMatch(*row) for row in query]
