"""Refresh actors: league metadata, teams, seasons, and the season, daily and weekly schedules.

They keep league, team, season and match rows current so dispatch has something to find; they
never start listeners. The scheduler sends them whenever APP_ENV is not develop (scheduler
table). Thin wrappers over lifecycle.league_refresh and lifecycle.schedule; the settings are the
actor runtime's (``actors.actor_runtime.current()``), read at each call.
"""

from __future__ import annotations

import dramatiq

from actors.actor_runtime import current
from actors.broker import QUEUE_DEFAULT
from config.clock import utcnow
from config.settings import KickoffSettings
from lifecycle import league_refresh, schedule


def _settings() -> KickoffSettings:
    return current().settings


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def refresh_league_schedule(league: str, year: int | None = None, season: str = "REG") -> dict:
    """Refresh a league's whole season schedule (default: the season active today)."""
    r = schedule.refresh_season(_settings(), league=league, today=utcnow().date(), year=year, season=season)
    return {"league": league, "seen": r.seen, "created": r.created, "updated": r.updated}


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def refresh_daily_schedules(days_ahead: int = 1) -> dict:
    """Refresh today's (and the next ``days_ahead`` days') schedule of every daily league (models.leagues)."""
    return {"seen": schedule.refresh_daily(_settings(), today=utcnow().date(), days_ahead=days_ahead)}


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def refresh_weekly_schedules(week: int | None = None, season: str = "REG") -> dict:
    """Refresh the current week of every weekly league (each by its declared week rule, models.leagues).

    Returns the games seen per league and the ``[season year, week]`` read per league."""
    seen, weeks = schedule.refresh_weekly(_settings(), today=utcnow().date(), week=week, season=season)
    return {"seen": seen, "weeks": {league: list(yw) for league, yw in weeks.items()}}


def _league_result(r: league_refresh.LeagueRefreshResult) -> dict:
    return {
        "league": r.league,
        "seen": r.seen,
        "created": r.created,
        "updated": r.updated,
        "league_changed": r.league_changed,
    }


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def refresh_league_metadata(league: str) -> dict:
    """Refresh a league's metadata and its teams' conferences and divisions (the hierarchy document)."""
    return _league_result(league_refresh.refresh_league_metadata(_settings(), league=league))


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def refresh_league_teams(league: str) -> dict:
    """Refresh a league's teams: name, market and alias (the teams document)."""
    return _league_result(league_refresh.refresh_league_teams(_settings(), league=league))


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def refresh_league_seasons(league: str) -> dict:
    """Refresh a league's seasons (the seasons document); the season schedule refresh reads them."""
    return _league_result(league_refresh.refresh_league_seasons(_settings(), league=league))
