"""League refresh: the provider's league metadata (hierarchy), teams and seasons, upserted idempotently.

Three documents per league, fetched like the schedule (``lifecycle.schedule.fetch``: API key in
the header only, every failure a ScheduleFetchError naming the masked URL):

* ``/{league}/{access}/league/hierarchy.json`` - the league's id, alias and name (League.sr_id,
  alias, full_name) and every team with its conference (MLB: its league, AL or NL) and division;
* ``/{league}/{access}/league/teams.json`` - every team's name, market and alias (MLB: ``abbr``);
* ``/{league}/{access}/league/seasons.json`` - every season's year, type (``PRE``/``REG``/``PST``,
  given as a string or ``{"code": ...}``), status and dates.

Rows are keyed by the provider's id within the league. A value that changed is updated (with
``updated_at``); an unchanged row is not written, so a second run with the same documents
changes nothing. Teams and seasons the provider no longer lists are kept. Each document is
applied in one transaction. A malformed team or season (no id, name, year or type, unreadable
dates, a text field PostgreSQL cannot store: config.feed_text) is set aside with its reason
(config.set_aside: one log line, one count); the others are stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from config.errors import MalformedFeedEntry
from config.feed_text import feed_id, feed_text
from config.set_aside import set_aside
from config.settings import KickoffSettings, mask_url
from lifecycle.errors import ScheduleFetchError
from lifecycle.leagues import ensure_league
from lifecycle.schedule import RefreshResult, entries, entry_name, fetch
from models.base import LeagueRecord
from models.boundary import connection, transaction
from models.league import update_league_fields
from models.league_records import upsert_league_records
from models.season import Season
from models.team import Team

logger = logging.getLogger(__name__)

LEAGUE_DOCUMENTS = ("hierarchy", "teams", "seasons")
#: The loop's name where it sets a team or season aside (config.set_aside).
LOOP = "league refresh"


@dataclass(frozen=True)
class LeagueMetadata:
    """The league object of a league document."""

    sr_id: str
    alias: str | None
    full_name: str | None


def league_document_path(league: str, access: str, document: str) -> str:
    """Path of one league document (``hierarchy``, ``teams`` or ``seasons``)."""
    return f"/{league}/{access}/league/{document}.json"


# -- parsing the provider's documents ------------------------------------------------


def parse_league(doc: dict[str, Any], *, url: str) -> LeagueMetadata:
    """The ``league`` object (id required) of a hierarchy, teams or seasons document."""
    league = doc.get("league")
    if not isinstance(league, dict) or not league.get("id"):
        raise ScheduleFetchError(f"league document {url} has no league id")
    try:
        return LeagueMetadata(
            sr_id=feed_id(league["id"], "league id"),
            alias=feed_text(league.get("alias"), "league alias"),
            full_name=feed_text(league.get("name"), "league name"),
        )
    except MalformedFeedEntry as exc:
        raise ScheduleFetchError(f"league document {url}: {exc}") from exc


def team_values(raw: Any) -> dict[str, Any]:
    """A team's stored values (sr_id, name, market, alias); MalformedFeedEntry without id or name."""
    if not isinstance(raw, dict):
        raise MalformedFeedEntry(f"a JSON {type(raw).__name__}, not an object")
    if not raw.get("id") or not raw.get("name"):
        raise MalformedFeedEntry("a team needs an id and a name")
    return {
        "sr_id": feed_id(raw["id"]),
        "name": feed_text(raw["name"], "name"),
        "market": feed_text(raw.get("market"), "market"),
        "alias": feed_text(raw.get("alias") or raw.get("abbr"), "alias"),
    }


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def checked(
    kind: str, raws: list[Any], values_of: Callable[[Any], dict[str, Any]], *, url: str
) -> list[dict[str, Any]]:
    """``values_of(raw)`` of each entry; a malformed one is set aside with its reason (a line, a count)."""
    out = []
    for position, raw in enumerate(raws):
        try:
            out.append(values_of(raw))
        except MalformedFeedEntry as exc:
            set_aside(LOOP, f"{entry_name(kind, raw, position)} of {url}", str(exc))
    return out


def hierarchy_teams(doc: dict[str, Any], *, url: str = "") -> list[dict[str, Any]]:
    """Every team of a hierarchy document, with its conference (MLB: league) and division names.

    A malformed team is set aside (``url`` names the document in its log line).
    """
    groups = doc.get("conferences") if "conferences" in doc else doc.get("leagues")
    teams = []
    for group in _dicts(groups):
        for division in _dicts(group.get("divisions")):

            def grouped_team(
                raw: Any, group: dict[str, Any] = group, division: dict[str, Any] = division
            ) -> dict[str, Any]:
                return {
                    **team_values(raw),
                    "conference": feed_text(group.get("name"), "conference name"),
                    "division": feed_text(division.get("name"), "division name"),
                }

            teams += checked("team", entries(division.get("teams")), grouped_team, url=url)
    return teams


def season_values(raw: Any) -> dict[str, Any]:
    """A season's stored values; MalformedFeedEntry without id, year or type, or with unreadable dates."""
    if not isinstance(raw, dict):
        raise MalformedFeedEntry(f"a JSON {type(raw).__name__}, not an object")
    if not raw.get("id"):
        raise MalformedFeedEntry("a season needs an id")
    kind = raw.get("type")
    kind = feed_text(kind.get("code") if isinstance(kind, dict) else kind, "type")
    try:
        year = int(raw["year"])
        start = date.fromisoformat(raw["start_date"]) if raw.get("start_date") else None
        end = date.fromisoformat(raw["end_date"]) if raw.get("end_date") else None
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedFeedEntry(
            f"a season needs a year and readable dates ({type(exc).__name__}: {exc})"
        ) from exc
    if not kind:
        raise MalformedFeedEntry("a season needs a type")
    return {
        "sr_id": feed_id(raw["id"]),
        "year": year,
        "type": kind.upper(),
        "status": feed_text(raw.get("status"), "status"),
        "start_date": start,
        "end_date": end,
    }


# -- storing ---------------------------------------------------------------------------


def _store(
    league_name: str,
    metadata: LeagueMetadata | None,
    model: type[LeagueRecord] | None,
    rows: list[dict[str, Any]],
) -> tuple[int, int, bool]:
    """Store the league's metadata (when given) and ``model`` rows in one transaction.

    Returns (rows created, rows updated, whether the league's metadata changed).
    """
    with connection():
        league = ensure_league(league_name)
        with transaction():
            league_changed = False
            if metadata is not None:
                values = {"sr_id": metadata.sr_id, "alias": metadata.alias, "full_name": metadata.full_name}
                changed = {k: v for k, v in values.items() if getattr(league, k) != v}
                if changed:
                    update_league_fields(league.id, changed)
                    league_changed = True
            created, updated = upsert_league_records(model, league, rows) if model is not None else (0, 0)
    return created, updated, league_changed


# -- the three refreshes ----------------------------------------------------------------


@dataclass(frozen=True)
class LeagueRefreshResult(RefreshResult):
    """What one league-document refresh did (``seen``/``created``/``updated`` count teams or seasons)."""

    league_changed: bool = False  # the league's own metadata (sr_id, alias, full_name) changed


def _refresh(settings: KickoffSettings, *, league: str, document: str) -> tuple[str, dict[str, Any]]:
    path = league_document_path(league.lower(), settings.schedule_access, document)
    url = mask_url(settings.sportradar_base_url.rstrip("/") + path)
    return url, fetch(settings, path, what=f"league {document}")


def _result(
    league: str, url: str, what: str, rows: list[Any], stored: tuple[int, int, bool]
) -> LeagueRefreshResult:
    created, updated, league_changed = stored
    logger.info(
        "league refresh %s: %d %s, %d new, %d updated%s",
        url,
        len(rows),
        what,
        created,
        updated,
        ", league metadata updated" if league_changed else "",
    )
    return LeagueRefreshResult(
        league=league,
        url=url,
        seen=len(rows),
        created=created,
        updated=updated,
        league_changed=league_changed,
    )


def refresh_league_metadata(settings: KickoffSettings, *, league: str) -> LeagueRefreshResult:
    """The hierarchy document: the league's metadata and each team's conference and division."""
    url, doc = _refresh(settings, league=league, document="hierarchy")
    metadata = parse_league(doc, url=url)
    teams = hierarchy_teams(doc, url=url)
    return _result(league, url, "teams", teams, _store(league, metadata, Team, teams))


def refresh_league_teams(settings: KickoffSettings, *, league: str) -> LeagueRefreshResult:
    """The teams document: each team's name, market and alias (conference and division untouched)."""
    url, doc = _refresh(settings, league=league, document="teams")
    parse_league(doc, url=url)
    teams = checked("team", entries(doc.get("teams")), team_values, url=url)
    return _result(league, url, "teams", teams, _store(league, None, Team, teams))


def refresh_league_seasons(settings: KickoffSettings, *, league: str) -> LeagueRefreshResult:
    """The seasons document: every season's year, type, status and dates."""
    url, doc = _refresh(settings, league=league, document="seasons")
    parse_league(doc, url=url)
    seasons = checked("season", entries(doc.get("seasons")), season_values, url=url)
    return _result(league, url, "seasons", seasons, _store(league, None, Season, seasons))
