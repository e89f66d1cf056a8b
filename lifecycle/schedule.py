"""Schedule refresh: pull the feed's schedule API (league season, daily, weekly) and upsert matches.

Each game's ``id`` is the Sportradar match id (Match.sr_id). New games become Match rows; known
ones get their start time and title updated and their status through ``Match.apply_refresh``
(freeze and heal, see models.status.refreshed_status). Refresh never starts listeners.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import requests

from config.clock import parse_iso8601, utcnow
from config.errors import ScheduleFetchError
from config.settings import MatchListenerEnvironment
from listener.stream import redact_url
from models.season_calendar import nfl_week, season_year
from models.status import normalise

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RefreshResult:
    """What one refresh did."""

    league: str
    url: str  # redacted
    seen: int
    created: int
    updated: int


#: Weeks of the NFL regular season (REG).
def daily_path(league: str, access: str, day: date) -> str:
    return f"/{league}/{access}/games/{day:%Y/%m/%d}/schedule.json"


def weekly_path(league: str, access: str, year: int, season: str, week: int) -> str:
    return f"/{league}/{access}/games/{year}/{season}/{week}/schedule.json"


def season_path(league: str, access: str, year: int, season: str) -> str:
    return f"/{league}/{access}/games/{year}/{season}/schedule.json"


def fetch(settings: MatchListenerEnvironment, path: str, *, what: str = "schedule") -> dict[str, Any]:
    """GET a schedule (or league, ``what``) document; the API key goes in the x-api-key header only."""
    url = settings.sportradar_base_url.rstrip("/") + path
    try:
        resp = requests.get(
            url,
            headers={"x-api-key": settings.sportradar_api_key.get_secret_value()},
            timeout=settings.schedule_timeout_seconds,
        )
    except requests.RequestException as exc:
        raise ScheduleFetchError(f"cannot fetch {what} {redact_url(url)}: {type(exc).__name__}") from exc
    if resp.status_code != 200:
        raise ScheduleFetchError(f"{what} {redact_url(url)} answered HTTP {resp.status_code}")
    try:
        doc = resp.json()
    except ValueError as exc:
        raise ScheduleFetchError(f"{what} {redact_url(url)} is not JSON") from exc
    if not isinstance(doc, dict):
        raise ScheduleFetchError(f"{what} {redact_url(url)} is not a JSON object")
    return doc


def games_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every game of a daily (``games``), weekly (``week.games``) or season (``weeks[].games``) document."""
    games = list(doc.get("games") or [])
    week = doc.get("week")
    if isinstance(week, dict):
        games += week.get("games") or []
    for w in doc.get("weeks") or []:
        if isinstance(w, dict):
            games += w.get("games") or []
    return [g for g in games if isinstance(g, dict) and g.get("id")]


def upsert_games(league_name: str, games: list[dict[str, Any]]) -> tuple[int, int]:
    """Create or update one Match per game; return (created, updated)."""
    from lifecycle.leagues import ensure_league
    from models.db import database
    from models.match import Match

    created = updated = 0
    now = utcnow()
    with database.connection_context():
        league = ensure_league(league_name)
        for g in games:
            sr_id = str(g["id"])
            scheduled = parse_iso8601(g["scheduled"], what="scheduled") if g.get("scheduled") else None
            title = g.get("title") or _title(g)
            incoming = str(g.get("status") or "scheduled")
            match = Match.select().where(Match.sr_id == sr_id).first()
            if match is None:
                if scheduled is None:
                    continue
                Match.create(
                    sr_id=sr_id,
                    league=league,
                    title=title,
                    scheduled=scheduled,
                    status=normalise(incoming) or "scheduled",
                    sr_status=incoming,
                    refreshed_at=now,
                )
                created += 1
                continue
            if scheduled is not None and (match.scheduled != scheduled or match.title != title):
                match.scheduled, match.title = scheduled, title
                match.save(only=[Match.scheduled, Match.title])
            match.apply_refresh(incoming, now=now)
            updated += 1
    return created, updated


def refresh(settings: MatchListenerEnvironment, *, league: str, path: str) -> RefreshResult:
    """Fetch one schedule document and upsert its games."""
    doc = fetch(settings, path)
    games = games_of(doc)
    created, updated = upsert_games(league, games)
    url = redact_url(settings.sportradar_base_url.rstrip("/") + path)
    logger.info("schedule refresh %s: %d games, %d new, %d updated", url, len(games), created, updated)
    return RefreshResult(league=league, url=url, seen=len(games), created=created, updated=updated)


def _title(g: dict[str, Any]) -> str | None:
    away = (g.get("away") or {}).get("alias")
    home = (g.get("home") or {}).get("alias")
    return f"{away} @ {home}" if away and home else None


def leagues_of(value: str) -> list[str]:
    """League names of a comma-separated setting (SCHEDULE_DAILY_LEAGUES, SCHEDULE_WEEKLY_LEAGUES)."""
    return [x.strip().lower() for x in value.split(",") if x.strip()]


def refresh_season(
    settings: MatchListenerEnvironment,
    *,
    league: str,
    today: date,
    year: int | None = None,
    season: str = "REG",
) -> RefreshResult:
    """Refresh ``league``'s whole season schedule (default: the season active on ``today``).

    The active season is the one the seasons table (the seasons refresh) says covers ``today``,
    or else the next to start; without stored seasons, ``season_year``.
    """
    if year is None:
        year = active_season_year(league, today) or season_year(league, today)
    return refresh(settings, league=league, path=season_path(league, settings.schedule_access, year, season))


def refresh_daily(settings: MatchListenerEnvironment, *, today: date, days_ahead: int = 1) -> dict[str, int]:
    """Refresh today's and the next ``days_ahead`` days' schedule of every daily league; games seen."""
    seen: dict[str, int] = {}
    for league in leagues_of(settings.schedule_daily_leagues):
        for n in range(days_ahead + 1):
            path = daily_path(league, settings.schedule_access, today + timedelta(days=n))
            seen[league] = seen.get(league, 0) + refresh(settings, league=league, path=path).seen
    return seen


def refresh_weekly(
    settings: MatchListenerEnvironment, *, today: date, week: int | None = None, season: str = "REG"
) -> tuple[dict[str, int], int, int]:
    """Refresh the current week (``nfl_week``; or ``week``) of every weekly league.

    Returns (games seen per league, season year, week).
    """
    year, current = nfl_week(today)
    week = week or current
    seen: dict[str, int] = {}
    for league in leagues_of(settings.schedule_weekly_leagues):
        path = weekly_path(league, settings.schedule_access, year, season, week)
        seen[league] = refresh(settings, league=league, path=path).seen
    return seen, year, week


def active_season_year(league: str, today: date) -> int | None:
    """Year of ``league``'s stored season covering ``today``, else of the next to start; None if none."""
    from lifecycle.leagues import find_league
    from models.db import database, database_errors
    from models.season import Season

    with database.connection_context(), database_errors():
        row = find_league(league)
        if row is None:
            return None
        seasons = Season.select().where(Season.league == row, Season.start_date.is_null(False))
        current = (
            seasons.where(
                Season.start_date <= today, Season.end_date.is_null(True) | (Season.end_date >= today)
            )
            .order_by(Season.start_date.desc())
            .first()
        )
        if current is None:
            current = seasons.where(Season.start_date > today).order_by(Season.start_date).first()
    return current.year if current is not None else None
