"""The dispatch selection: which matches need a listener now (one query, and a start-lock check).

``lifecycle.dispatch`` sends a start message for each match ``find_candidates`` returns; the query
is ``lifecycle.sql.dispatch.dispatchable_matches``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from config.clock import utcnow
from lifecycle.sql import rows
from lifecycle.sql.dispatch import dispatchable_matches
from models.coordination import CoordinationStore


def find_upcoming_matches_needing_listeners(
    *,
    within_minutes: int,
    is_test: bool | None,
    active_max_age_seconds: float,
    stale_seconds: float,
    now: datetime | None = None,
    coordination: CoordinationStore | None = None,
) -> list[str]:
    """Internal ids of matches the dispatcher should start a listener for (one query); see below."""
    return [
        candidate[0]
        for candidate in find_candidates(
            within_minutes=within_minutes,
            is_test=is_test,
            active_max_age_seconds=active_max_age_seconds,
            stale_seconds=stale_seconds,
            now=now,
            coordination=coordination,
        )
    ]


#: ``(match id, has a stale open row, its listener_start_settings or None when they are {})``.
Candidate = tuple[str, bool, Any]


def find_candidates(
    *,
    within_minutes: int,
    is_test: bool | None,
    active_max_age_seconds: float,
    stale_seconds: float,
    now: datetime | None = None,
    match_ids: list[str] | None = None,
    coordination: CoordinationStore | None = None,
) -> list[Candidate]:
    """A Candidate for every match needing a listener (one query; see below for the rare second).

    Enabled league, ``auto_dispatch_listener`` on; live statuses always, pre-game and delayed
    ones when ``scheduled`` is in [now - active age, now + within_minutes]; ``is_test`` filters
    test vs live (None: both); a match with an open row created within the active age and a
    fresh heartbeat is dropped (stale open rows do not block: dispatch abandons them); an is_test
    clone no srsim serves yet (``srsim_unserved``) is not selected.
    ``match_ids`` limits the selection to those matches (a restart of known matches).

    The open-row guard follows the start lock, not only the row's age: with ``coordination``, a
    match whose open row is older than the active age but still beats and still holds the
    match's start lock (its token is the row id) is dropped too (one MGET and one query, only
    when the selection flagged such rows).
    """
    now = now or utcnow()
    found = dispatchable_matches(
        now=now,
        within_minutes=within_minutes,
        is_test=is_test,
        active_max_age_seconds=active_max_age_seconds,
        stale_seconds=stale_seconds,
        match_ids=match_ids,
    )
    held = set()
    if coordination is not None:
        held = rows.held_by_their_open_rows(
            [m.match_id for m in found if m.old_beating],
            coordination=coordination,
            stale_seconds=stale_seconds,
        )
    return [(m.match_id, bool(m.has_stale), m.stored) for m in found if m.match_id not in held]
