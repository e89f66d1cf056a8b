"""Schedule refresh actors: the league season, daily (MLB, NHL) and weekly (NFL) schedules.

They keep match rows current so dispatch has something to find; they never start listeners.
The scheduler sends them whenever APP_ENV is not develop (scheduler table).
"""

from __future__ import annotations

from datetime import timedelta

import dramatiq

from actors import settings
from actors.broker import QUEUE_DEFAULT
from config.clock import utcnow
from listener.schedule import daily_path, refresh, season_path, weekly_path


def _leagues(value: str) -> list[str]:
    return [x.strip().lower() for x in value.split(",") if x.strip()]


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def refresh_league_schedule(league: str, year: int | None = None, season: str = "REG") -> dict:
    """Refresh a league's whole season schedule."""
    year = year or utcnow().year
    r = refresh(settings, league=league, path=season_path(league, settings.schedule_access, year, season))
    return {"league": league, "seen": r.seen, "created": r.created, "updated": r.updated}


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def refresh_daily_schedules(days_ahead: int = 1) -> dict:
    """Refresh today's (and the next ``days_ahead`` days') schedule of every daily league (MLB, NHL)."""
    out: dict[str, int] = {}
    today = utcnow().date()
    for league in _leagues(settings.schedule_daily_leagues):
        for n in range(days_ahead + 1):
            day = today + timedelta(days=n)
            r = refresh(settings, league=league, path=daily_path(league, settings.schedule_access, day))
            out[league] = out.get(league, 0) + r.seen
    return {"seen": out}


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def refresh_weekly_schedules(week: int | None = None, season: str = "REG") -> dict:
    """Refresh the current week of every weekly league (NFL); the week defaults to the ISO week's place
    in the season (September start), clamped to 1..18."""
    now = utcnow()
    if week is None:
        week = min(max(now.isocalendar().week - 36, 1), 18)
    out: dict[str, int] = {}
    for league in _leagues(settings.schedule_weekly_leagues):
        path = weekly_path(league, settings.schedule_access, now.year, season, week)
        out[league] = refresh(settings, league=league, path=path).seen
    return {"seen": out, "week": week}
