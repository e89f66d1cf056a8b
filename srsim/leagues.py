"""srsim's league documents: hierarchy, teams and seasons per league, in the provider's shapes.

The data of a league comes from the league file (``kickoff sim serve --leagues FILE``), read anew
on every request so a test or an operator renames a team by rewriting it::

    {"nfl": {"league": {"id": "…", "name": "National Football League", "alias": "NFL"},
             "conferences": [{"id": "…", "name": "AFC", "alias": "AFC",
                              "divisions": [{"id": "…", "name": "AFC East", "alias": "AFC_EAST",
                                             "teams": [{"id": "…", "name": "Bills",
                                                        "market": "Buffalo", "alias": "BUF"}]}]}],
             "seasons": [{"id": "…", "year": 2026, "type": "REG", "status": "scheduled",
                          "start_date": "2026-09-10", "end_date": "2027-01-10"}]}}

A league the file does not name (or every league without a file) is built from the served
games: one conference and division holding the teams its games play, and one REG season around
today. Rendering follows the provider: MLB's hierarchy groups divisions under ``leagues`` (AL,
NL) and names a team's alias ``abbr``; the others use ``conferences`` and ``alias``; a season's
type is ``{"code": "REG"}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from models.season_calendar import season_year
from srsim.errors import SimulatorScriptError
from srsim.models import model_of, name_uuid
from srsim.script import GameScript


def _id(*parts: str) -> str:
    return name_uuid("/".join(parts))


def team_id(alias: str) -> str:
    """The id srsim gives a team (the same one its push payloads carry)."""
    return name_uuid(alias)


def read_league_file(path: Path | None) -> dict[str, Any]:
    """The league file's data by lower-case league name ({} without a file)."""
    if path is None or not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SimulatorScriptError(f"league file {path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise SimulatorScriptError(f"league file {path} must be an object by league name")
    return {str(k).lower(): v for k, v in data.items() if isinstance(v, dict)}


def default_league(league: str, games: Iterable[GameScript], *, today: date) -> dict[str, Any]:
    """A league's data built from the games srsim serves for it (see the module docstring)."""
    teams: dict[str, dict[str, str]] = {}
    for game in games:
        for name, market, alias in (game.home, game.away):
            teams.setdefault(alias, {"id": team_id(alias), "name": name, "market": market, "alias": alias})
    year = season_year(league, today)
    return {
        "league": {"id": _id("league", league), "name": league.upper(), "alias": league.upper()},
        "conferences": [
            {
                "id": _id("conference", league),
                "name": "East",
                "alias": "EAST",
                "divisions": [
                    {
                        "id": _id("division", league),
                        "name": "Central",
                        "alias": "CENTRAL",
                        "teams": sorted(teams.values(), key=lambda t: t["alias"]),
                    }
                ],
            }
        ],
        "seasons": [
            {
                "id": _id("season", league, str(year), "REG"),
                "year": year,
                "type": "REG",
                "status": "inprogress",
                "start_date": (today - timedelta(days=30)).isoformat(),
                "end_date": (today + timedelta(days=150)).isoformat(),
            }
        ],
    }


def _team(league: str, raw: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in raw.items() if k != "alias"}
    out[model_of(league).alias_key] = raw.get("alias")
    return out


def hierarchy_document(league: str, data: dict[str, Any]) -> dict[str, Any]:
    """``league/hierarchy.json``: the league, its conferences (its event model's ``groups_key``: baseball's
    leagues), divisions and teams."""
    groups = [
        {
            **{k: v for k, v in group.items() if k != "divisions"},
            "divisions": [
                {
                    **{k: v for k, v in division.items() if k != "teams"},
                    "teams": [_team(league, t) for t in division.get("teams") or []],
                }
                for division in group.get("divisions") or []
            ],
        }
        for group in data.get("conferences") or []
    ]
    return {"league": data.get("league") or {}, model_of(league).groups_key: groups}


def teams_document(league: str, data: dict[str, Any]) -> dict[str, Any]:
    """``league/teams.json``: every team of the league, without its conference and division."""
    teams = [
        _team(league, t)
        for group in data.get("conferences") or []
        for division in group.get("divisions") or []
        for t in division.get("teams") or []
    ]
    return {"league": data.get("league") or {}, "teams": teams}


def seasons_document(data: dict[str, Any]) -> dict[str, Any]:
    """``league/seasons.json``: the league's seasons, each type as ``{"code": ...}``."""
    seasons = [
        {**{k: v for k, v in s.items() if k != "type"}, "type": {"code": s.get("type")}}
        for s in data.get("seasons") or []
    ]
    return {"league": data.get("league") or {}, "seasons": seasons}
