"""Schedule refresh against srsim's schedule API: upsert, freeze, and the provider's document shapes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from lifecycle.errors import ScheduleFetchError
from lifecycle.schedule import daily_path, games_of, refresh, weekly_path
from models import Match
from srsim.script import GameScript


def test_a_daily_refresh_creates_new_matches_and_freezes_a_live_one(sim, listener_settings, make_match):
    new, live = (GameScript(sr_id=str(uuid.uuid4()), league="mlb", start_after=30) for _ in range(2))
    server = sim([new, live], write_status=False)
    local = make_match("mlb", sr_id=live.sr_id, status="inprogress")  # the stream already saw it live
    settings = listener_settings(sportradar_base_url=server.base_url)
    result = refresh(settings, league="mlb", path=daily_path("mlb", "trial", datetime.now(UTC).date()))
    assert (result.seen, result.created, result.updated) == (2, 1, 1)
    created = Match.get(Match.sr_id == new.sr_id)
    assert created.status == "scheduled" and created.league.name == "mlb"
    assert Match.get_by_id(local.id).status == "inprogress"  # freeze: schedule said scheduled
    assert Match.get_by_id(local.id).sr_status == "scheduled"


def test_a_schedule_refresh_leaves_the_status_and_schedule_of_an_is_test_match_alone(make_match):
    """srsim owns a test clone's Match.status; the refresh writes only live matches."""
    from datetime import timedelta

    from lifecycle.schedule import upsert_games

    then = datetime(2026, 1, 1, 18, tzinfo=UTC)
    clone = make_match("mlb", status="scheduled", is_test=True, scheduled=then, title="clone")
    live = make_match("mlb", status="scheduled", scheduled=then, title="live")
    moved = (then + timedelta(hours=2)).isoformat()
    games = [{"id": m.sr_id, "scheduled": moved, "status": "closed", "title": "moved"} for m in (clone, live)]
    upsert_games("mlb", games)
    kept, written = Match.get_by_id(clone.id), Match.get_by_id(live.id)
    assert (kept.status, kept.scheduled, kept.title) == ("scheduled", then, "clone")
    assert (written.status, written.title) == ("closed", "moved")
    assert written.scheduled == then + timedelta(hours=2)


def test_a_weekly_refresh_reads_the_nfl_week_shape(sim, listener_settings, db):
    game = GameScript(sr_id=str(uuid.uuid4()), league="nfl", week=3)
    server = sim([game], write_status=False)
    settings = listener_settings(sportradar_base_url=server.base_url)
    result = refresh(settings, league="nfl", path=weekly_path("nfl", "trial", 2024, "REG", 3))
    assert result.created == 1
    assert Match.get(Match.sr_id == game.sr_id).title


def test_games_are_found_in_daily_weekly_and_season_documents():
    g = {"id": "x", "status": "scheduled"}
    assert games_of({"games": [g]}) == [g]
    assert games_of({"week": {"games": [g]}}) == [g]
    assert games_of({"weeks": [{"games": [g]}, {"games": [g]}]}) == [g, g]


def test_an_unreachable_schedule_api_is_one_clear_error(listener_settings):
    settings = listener_settings(sportradar_base_url="http://127.0.0.1:9")
    with pytest.raises(ScheduleFetchError, match="cannot fetch schedule"):
        refresh(settings, league="mlb", path="/mlb/trial/games/2024/05/21/schedule.json")


@pytest.mark.parametrize(
    ("app_env", "scheduled"), [("develop", False), ("staging", True), ("production", True)]
)
def test_league_and_schedule_refresh_are_scheduled_whenever_app_env_is_not_develop(app_env, scheduled):
    from scheduler.table import entries_for

    entries = entries_for(app_env)
    actors = {e.actor for e in entries}
    wanted = {"refresh_league_schedule", "refresh_daily_schedules", "refresh_weekly_schedules"}
    per_league = {"refresh_league_metadata", "refresh_league_teams", "refresh_league_seasons"}
    assert ((wanted | per_league) <= actors) is scheduled
    assert not ((wanted | per_league) & actors) or scheduled
    leagues = {(e.actor, e.kwargs.get("league")) for e in entries}
    expected = {(a, lg) for a in (*per_league, "refresh_league_schedule") for lg in ("mlb", "nhl", "nfl")}
    assert (expected <= leagues) is scheduled


@pytest.mark.parametrize(
    ("day", "expected"),
    [
        ("2024-08-01", (2024, 1)),  # off-season: week 1
        ("2024-09-03", (2024, 1)),  # the Tuesday before the opener (Labor Day was 2 September)
        ("2024-09-05", (2024, 1)),  # the opener
        ("2024-09-09", (2024, 1)),  # Monday night of week 1
        ("2024-09-10", (2024, 2)),  # Tuesday: week 2
        ("2024-12-29", (2024, 17)),
        ("2025-01-05", (2024, 18)),  # January belongs to the season that started in September
        ("2025-02-09", (2024, 18)),  # playoffs: clamped to 18
        ("2025-09-04", (2025, 1)),  # Labor Day 1 September 2025, opener 4 September
        ("2025-09-09", (2025, 2)),
        ("2026-09-10", (2026, 1)),  # Labor Day 7 September 2026
    ],
)
def test_the_nfl_week_heuristic(day, expected):
    from datetime import date

    from models.season_calendar import week_of

    assert week_of("nfl", date.fromisoformat(day)) == expected


@pytest.mark.parametrize(
    ("league", "day", "year"),
    [
        ("mlb", "2025-01-10", 2025),
        ("nhl", "2025-01-10", 2024),
        ("nhl", "2025-10-10", 2025),
        ("nfl", "2025-02-01", 2024),
    ],
)
def test_the_season_year_of_a_league(league, day, year):
    from datetime import date

    from models.season_calendar import season_year

    assert season_year(league, date.fromisoformat(day)) == year
