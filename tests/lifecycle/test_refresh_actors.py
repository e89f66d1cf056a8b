"""The three schedule refresh actors against srsim's schedule API, in process and on a real worker."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from models import Match
from models.leagues import Cadence, with_cadence
from models.season_calendar import season_year, week_of
from srsim.script import GameScript
from tests.waiting import wait_for


def _game(league: str, **kw) -> GameScript:
    return GameScript(sr_id=str(uuid.uuid4()), league=league, start_after=600, **kw)


def test_refresh_daily_schedules_reads_today_and_tomorrow_of_each_daily_league(srsim, pointed_at, make_match):
    from actors.refresh import refresh_daily_schedules

    mlb, nhl, nfl = _game("mlb"), _game("nhl"), _game("nfl")
    server = srsim([mlb, nhl, nfl])
    live = make_match("mlb", sr_id=mlb.sr_id, status="inprogress")
    pointed_at(server)
    out = refresh_daily_schedules.fn()
    daily = [d.name for d in with_cadence(Cadence.DAILY)]
    assert out == {"seen": {name: 1 if name in ("mlb", "nhl") else 0 for name in daily}}
    assert Match.get(Match.sr_id == nhl.sr_id).status == "scheduled"
    assert Match.get_by_id(live.id).status == "inprogress"  # freeze
    assert not Match.select().where(Match.sr_id == nfl.sr_id).exists()
    assert len(server.schedule_requests) == 2 * len(daily)
    assert all("/games/" in p for p in server.schedule_requests)


def test_refresh_weekly_schedules_asks_for_the_current_nfl_week_and_season(srsim, pointed_at, db):
    from actors.refresh import refresh_weekly_schedules

    year, week = week_of("nfl", datetime.now(UTC).date())
    this_week, other_week = _game("nfl", week=week), _game("nfl", week=week % 18 + 1)
    server = srsim([this_week, other_week])
    pointed_at(server)
    out = refresh_weekly_schedules.fn()
    assert out == {"seen": {"nfl": 1}, "weeks": {"nfl": [year, week]}}
    assert server.schedule_requests == [f"/nfl/trial/games/{year}/REG/{week}/schedule.json"]
    assert Match.get(Match.sr_id == this_week.sr_id).league.name == "nfl"
    assert not Match.select().where(Match.sr_id == other_week.sr_id).exists()


def test_refresh_league_schedule_reads_the_active_season(srsim, pointed_at, db):
    from actors.refresh import refresh_league_schedule

    games = [_game("nhl", week=1), _game("nhl", week=2), _game("mlb")]
    server = srsim(games)
    pointed_at(server)
    out = refresh_league_schedule.fn(league="nhl")
    assert out == {"league": "nhl", "seen": 2, "created": 2, "updated": 0}
    year = season_year("nhl", datetime.now(UTC).date())
    assert server.schedule_requests == [f"/nhl/trial/games/{year}/REG/schedule.json"]
    assert refresh_league_schedule.fn(league="nhl")["updated"] == 2


@pytest.mark.e2e
def test_the_refresh_actors_run_on_a_real_worker_against_srsim(srsim, start_worker, broker_queues):
    from actors.refresh import refresh_daily_schedules, refresh_league_schedule, refresh_weekly_schedules

    _, week = week_of("nfl", datetime.now(UTC).date())
    daily, weekly, season = _game("mlb"), _game("nfl", week=week), _game("nhl")
    server = srsim([daily, weekly, season])
    start_worker(queues=("default",), threads=2, env={"SPORTRADAR_BASE_URL": server.base_url})
    refresh_daily_schedules.send()
    refresh_weekly_schedules.send()
    refresh_league_schedule.send(league="nhl")
    ids = {daily.sr_id, weekly.sr_id, season.sr_id}
    wait_for(lambda: Match.select().where(Match.sr_id.in_(ids)).count() == 3, timeout=60)


def test_a_schedule_refresh_never_moves_closed_back_to_complete_but_moves_complete_to_closed(
    static_feed, lsettings, make_match
):
    from lifecycle.schedule import refresh

    closed = make_match(sr_id="sr:match:closed", status="closed")
    complete = make_match(sr_id="sr:match:complete", status="complete")
    path = "/nfl/trial/games/2030/REG/1/schedule.json"
    games = [
        {"id": "sr:match:closed", "scheduled": "2030-09-08T17:00:00+00:00", "status": "complete"},
        {"id": "sr:match:complete", "scheduled": "2030-09-08T17:00:00+00:00", "status": "closed"},
    ]
    url = static_feed({path: {"week": {"games": games}}})
    result = refresh(lsettings.model_copy(update={"sportradar_base_url": url}), league="nfl", path=path)
    assert result.updated == 2
    assert Match.get_by_id(closed.id).status == "closed"
    assert Match.get_by_id(closed.id).sr_status == "complete"  # what the provider said is still kept
    assert Match.get_by_id(complete.id).status == "closed"
