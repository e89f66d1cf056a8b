"""Schedule refresh: pull the feed's schedule API (league season, daily, weekly) and upsert matches.

Each game's ``id`` is the Sportradar match id (Match.sr_id). New games become Match rows; known
ones get their start time and title updated and their status through ``Match.apply_refresh``
(freeze and heal, see models.status.refreshed_status); is_test matches are left alone (srsim
owns their status and schedule). Refresh never starts listeners.

Each game is handled on its own: a malformed one (not an object, no id, an unreadable start
time, a field of the wrong type or text PostgreSQL cannot store: config.feed_text) is set
aside with its reason (config.set_aside: one log line, one count) and the games after it are
upserted all the same.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

import requests

from config.clock import parse_iso8601, utcnow
from config.errors import InvalidTimeError, MalformedFeedEntry
from config.feed_text import feed_id, feed_text
from config.set_aside import set_aside
from config.settings import KickoffSettings, mask_url
from lifecycle.errors import ScheduleFetchError
from lifecycle.leagues import ensure_league, find_league
from models.boundary import connection
from models.leagues import Cadence, with_cadence
from models.match import create_match, match_by_sr_id, reschedule_match
from models.season import season_covering
from models.season_calendar import season_year, week_of
from models.status import normalise

logger = logging.getLogger(__name__)


#: The loop's name where it sets a game aside (config.set_aside).
LOOP = "schedule refresh"


@dataclass(frozen=True)
class RefreshResult:
    """What one refresh did."""

    league: str
    url: str  # masked (mask_url)
    seen: int
    created: int
    updated: int
    set_aside: int = 0  # entries that could not be handled (logged with their reason)


@dataclass(frozen=True)
class ScheduleEntry:
    """One game of a schedule document, checked."""

    sr_id: str  # the provider's match id
    scheduled: datetime | None  # None: the document gives no start time
    title: str | None
    status: str  # as the provider says it (models.status decides what is stored)


def daily_path(league: str, access: str, day: date) -> str:
    return f"/{league}/{access}/games/{day:%Y/%m/%d}/schedule.json"


def weekly_path(league: str, access: str, year: int, season: str, week: int) -> str:
    return f"/{league}/{access}/games/{year}/{season}/{week}/schedule.json"


def season_path(league: str, access: str, year: int, season: str) -> str:
    return f"/{league}/{access}/games/{year}/{season}/schedule.json"


def fetch(settings: KickoffSettings, path: str, *, what: str = "schedule") -> dict[str, Any]:
    """GET a schedule (or league, ``what``) document; the API key goes in the x-api-key header only."""
    url = settings.sportradar_base_url.rstrip("/") + path
    try:
        resp = requests.get(
            url,
            headers={"x-api-key": settings.sportradar_api_key.get_secret_value()},
            timeout=settings.schedule_timeout_seconds,
        )
    except requests.RequestException as exc:
        raise ScheduleFetchError(f"cannot fetch {what} {mask_url(url)}: {type(exc).__name__}") from exc
    if resp.status_code != 200:
        raise ScheduleFetchError(f"{what} {mask_url(url)} answered HTTP {resp.status_code}")
    try:
        doc = resp.json()
    except ValueError as exc:
        raise ScheduleFetchError(f"{what} {mask_url(url)} is not JSON") from exc
    if not isinstance(doc, dict):
        raise ScheduleFetchError(f"{what} {mask_url(url)} is not a JSON object")
    return doc


def games_of(doc: dict[str, Any]) -> list[Any]:
    """Every game entry of a daily (``games``), weekly (``week.games``) or season (``weeks[].games``)
    document, as given (``schedule_entry`` checks each one)."""
    games = entries(doc.get("games"))
    week = doc.get("week")
    if isinstance(week, dict):
        games += entries(week.get("games"))
    for w in entries(doc.get("weeks")):
        if isinstance(w, dict):
            games += entries(w.get("games"))
    return games


def entries(value: Any) -> list[Any]:
    """The entries of a document's list (a copy), or none when the value is not a list."""
    return list(value) if isinstance(value, list) else []


def entry_name(kind: str, raw: Any, position: int) -> str:
    """How a set-aside entry is named: ``{kind} {id}`` with a usable id, else ``{kind} #{position}``."""
    raw_id = raw.get("id") if isinstance(raw, dict) else None
    return f"{kind} {raw_id}" if isinstance(raw_id, str | int) and raw_id != "" else f"{kind} #{position}"


def schedule_entry(g: Any) -> ScheduleEntry:
    """Check one game of a schedule document; MalformedFeedEntry saying what is wrong with it."""
    if not isinstance(g, dict):
        raise MalformedFeedEntry(f"a JSON {type(g).__name__}, not an object")
    sr_id = feed_id(g.get("id"))
    scheduled_text = feed_text(g.get("scheduled"), "scheduled")
    try:
        scheduled = parse_iso8601(scheduled_text, what="scheduled") if scheduled_text else None
    except InvalidTimeError as exc:
        raise MalformedFeedEntry(str(exc)) from exc
    return ScheduleEntry(
        sr_id=sr_id,
        scheduled=scheduled,
        title=feed_text(g.get("title"), "title") or _title(g),
        status=feed_text(g.get("status"), "status") or "scheduled",
    )


def upsert_games(league_name: str, games: list[Any], *, url: str = "") -> tuple[int, int, int]:
    """Create or update one Match per game; return (created, updated, set aside).

    A malformed game is set aside (``url`` names its document in the log line); the others go on.
    """
    created = updated = aside = 0
    now = utcnow()
    where = f" of {url}" if url else ""
    with connection():
        league = ensure_league(league_name)
        for position, g in enumerate(games):
            try:
                entry = schedule_entry(g)
                if entry.scheduled is None and match_by_sr_id(entry.sr_id) is None:
                    raise MalformedFeedEntry("no scheduled time, which a new match needs")
            except MalformedFeedEntry as exc:
                set_aside(LOOP, f"{entry_name('game', g, position)}{where}", str(exc))
                aside += 1
                continue
            match = match_by_sr_id(entry.sr_id)
            if match is None:
                create_match(
                    sr_id=entry.sr_id,
                    league=league,
                    title=entry.title,
                    scheduled=entry.scheduled,
                    status=normalise(entry.status) or "scheduled",
                    sr_status=entry.status,
                    refreshed_at=now,
                )
                created += 1
                continue
            if match.is_test:
                continue  # srsim owns a test clone's status and schedule (spec: two writers)
            if entry.scheduled is not None and (
                match.scheduled != entry.scheduled or match.title != entry.title
            ):
                reschedule_match(match, scheduled=entry.scheduled, title=entry.title)
            match.apply_refresh(entry.status, now=now)
            updated += 1
    return created, updated, aside


def refresh(settings: KickoffSettings, *, league: str, path: str) -> RefreshResult:
    """Fetch one schedule document and upsert its games."""
    doc = fetch(settings, path)
    games = games_of(doc)
    url = mask_url(settings.sportradar_base_url.rstrip("/") + path)
    created, updated, aside = upsert_games(league, games, url=url)
    logger.info(
        "schedule refresh %s: %d games, %d new, %d updated, %d set aside",
        url,
        len(games),
        created,
        updated,
        aside,
    )
    return RefreshResult(
        league=league, url=url, seen=len(games), created=created, updated=updated, set_aside=aside
    )


def _title(g: dict[str, Any]) -> str | None:
    away, home = g.get("away"), g.get("home")
    if not isinstance(away, dict) or not isinstance(home, dict):
        return None
    try:
        away_alias, home_alias = feed_text(away.get("alias"), "alias"), feed_text(home.get("alias"), "alias")
    except MalformedFeedEntry:
        return None
    return f"{away_alias} @ {home_alias}" if away_alias and home_alias else None


def refresh_season(
    settings: KickoffSettings,
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


def refresh_daily(settings: KickoffSettings, *, today: date, days_ahead: int = 1) -> dict[str, int]:
    """Refresh today's and the next ``days_ahead`` days' schedule of every daily league (models.leagues);
    games seen per league."""
    seen: dict[str, int] = {}
    for league in (d.name for d in with_cadence(Cadence.DAILY)):
        for n in range(days_ahead + 1):
            path = daily_path(league, settings.schedule_access, today + timedelta(days=n))
            seen[league] = seen.get(league, 0) + refresh(settings, league=league, path=path).seen
    return seen


def refresh_weekly(
    settings: KickoffSettings, *, today: date, week: int | None = None, season: str = "REG"
) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
    """Refresh the current week of every weekly league, each by its own week rule (models.leagues;
    ``week``: that week of the current season instead).

    Returns (games seen per league, (season year, week) per league).
    """
    seen: dict[str, int] = {}
    weeks: dict[str, tuple[int, int]] = {}
    for league in (d.name for d in with_cadence(Cadence.WEEKLY)):
        year, current = week_of(league, today)
        weeks[league] = (year, week or current)
        path = weekly_path(league, settings.schedule_access, year, season, week or current)
        seen[league] = refresh(settings, league=league, path=path).seen
    return seen, weeks


def active_season_year(league: str, today: date) -> int | None:
    """Year of ``league``'s stored season covering ``today``, else of the next to start; None if none."""
    with connection():
        row = find_league(league)
        if row is None:
            return None
        current = season_covering(row.id, today)
    return current.year if current is not None else None
