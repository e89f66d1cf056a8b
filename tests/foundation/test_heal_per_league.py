"""The status heal's table (freeze / heal / stream) for every declared league, its question issued
by the league's own pipeline from its simulator's first play (models.status.refreshed_status,
Match.apply_refresh)."""

from __future__ import annotations

import pkgutil
import threading
import uuid
from datetime import timedelta

import pytest

from models import Match, Question
from models.leagues import declared
from srsim.script import GameScript

LEAGUES = [d.name for d in declared()]

#: (case, local status, question issued, stream status first (None: none), schedule says, stored after)
TABLE = [
    ("heal: a question issued and the start past", "scheduled", True, None, "scheduled", "inprogress"),
    ("no heal without an in-game question", "scheduled", False, None, "scheduled", "scheduled"),
    ("heal a delayed row too", "delayed", True, None, "scheduled", "inprogress"),
    # The spec's counterexample: an in-progress stream and a stale schedule saying scheduled: keep it
    # live, never award everything by closing it.
    (
        "freeze: a live stream beats a stale schedule",
        "scheduled",
        True,
        "inprogress",
        "scheduled",
        "inprogress",
    ),
    ("freeze: a finished game never reopens", "scheduled", True, "closed", "scheduled", "closed"),
    ("stream: the provider's closed is trusted", "scheduled", True, "inprogress", "closed", "closed"),
    ("the heal never invents closed", "scheduled", True, None, "created", "inprogress"),
]


def _issue_first_unit(match: Match, league: str) -> None:
    """The league's pipeline reads its simulated game's first play (the first unit's start)."""
    decl = next(d for d in declared() if d.name == league)
    pipeline = pkgutil.resolve_name(decl.pipeline)(
        match_id=str(match.id), settings=None, db_gate=threading.Semaphore()
    )
    first = GameScript(sr_id=str(uuid.uuid4()), league=league, event_count=4).envelopes(match.scheduled)[0]
    pipeline.process(first)
    assert Question.select().where(Question.match == match.id, Question.status == "open").count() == 1


@pytest.mark.parametrize("league", LEAGUES)
@pytest.mark.parametrize(
    ("case", "local", "asked", "stream", "schedule", "after"), TABLE, ids=[r[0] for r in TABLE]
)
def test_the_heal_table_holds_for_each_league(
    league, case, local, asked, stream, schedule, after, make_match, frozen_clock
):
    match = make_match(league, status=local, scheduled=frozen_clock.now - timedelta(hours=1))
    if asked:
        _issue_first_unit(match, league)
    if stream is not None:
        match.apply_stream(stream)
    assert Match.get_by_id(match.id).apply_refresh(schedule) == after
    assert Match.get_by_id(match.id).status == after


@pytest.mark.parametrize("league", LEAGUES)
def test_the_heal_waits_for_the_scheduled_start_in_each_league(league, make_match, frozen_clock):
    match = make_match(league, status="scheduled", scheduled=frozen_clock.now + timedelta(minutes=5))
    _issue_first_unit(match, league)
    assert Match.get_by_id(match.id).apply_refresh("scheduled") == "scheduled"
