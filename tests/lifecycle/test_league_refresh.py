"""The league refresh actors (metadata, teams, seasons) against srsim's league documents and PostgreSQL."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from lifecycle.errors import ScheduleFetchError
from models import League, Match, Season, Team
from srsim.script import GameScript
from tests.waiting import wait_for


def _team(name: str, market: str, alias: str) -> dict[str, str]:
    return {"id": str(uuid.uuid4()), "name": name, "market": market, "alias": alias}


def _nfl_data(*, seasons: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "league": {"id": "nfl-league-id", "name": "National Football League", "alias": "NFL"},
        "conferences": [
            {
                "id": "afc",
                "name": "AFC",
                "alias": "AFC",
                "divisions": [
                    {
                        "id": "afc-east",
                        "name": "AFC East",
                        "alias": "AFC_EAST",
                        "teams": [_team("Bills", "Buffalo", "BUF"), _team("Jets", "New York", "NYJ")],
                    }
                ],
            },
            {
                "id": "nfc",
                "name": "NFC",
                "alias": "NFC",
                "divisions": [
                    {
                        "id": "nfc-north",
                        "name": "NFC North",
                        "alias": "NFC_NORTH",
                        "teams": [_team("Bears", "Chicago", "CHI")],
                    }
                ],
            },
        ],
        "seasons": seasons or [],
    }


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data))
    return path


def _by_alias(league: str) -> dict[str, Team]:
    return {t.alias: t for t in Team.select().join(League).where(League.name == league)}


def test_refresh_league_metadata_stores_the_league_and_each_teams_conference_and_division(
    srsim, pointed_at, tmp_path
):
    from actors.refresh import refresh_league_metadata

    data = _nfl_data()
    server = srsim([], league_file=_write(tmp_path / "leagues.json", {"nfl": data}))
    pointed_at(server)
    out = refresh_league_metadata.fn(league="nfl")
    assert out == {"league": "nfl", "seen": 3, "created": 3, "updated": 0, "league_changed": True}
    assert server.schedule_requests == ["/nfl/trial/league/hierarchy.json"]
    league = League.get(League.name == "nfl")
    assert (league.sr_id, league.alias, league.full_name) == (
        "nfl-league-id",
        "NFL",
        "National Football League",
    )
    teams = _by_alias("nfl")
    assert {a: (t.conference, t.division, t.market, t.name) for a, t in teams.items()} == {
        "BUF": ("AFC", "AFC East", "Buffalo", "Bills"),
        "NYJ": ("AFC", "AFC East", "New York", "Jets"),
        "CHI": ("NFC", "NFC North", "Chicago", "Bears"),
    }
    bills = data["conferences"][0]["divisions"][0]["teams"][0]
    assert teams["BUF"].sr_id == bills["id"]


def test_a_second_run_changes_nothing_and_a_renamed_team_is_updated(srsim, pointed_at, tmp_path):
    from actors.refresh import refresh_league_metadata, refresh_league_teams

    data = _nfl_data()
    path = _write(tmp_path / "leagues.json", {"nfl": data})
    pointed_at(srsim([], league_file=path))
    refresh_league_metadata.fn(league="nfl")
    assert refresh_league_teams.fn(league="nfl") == {
        "league": "nfl",
        "seen": 3,
        "created": 0,
        "updated": 0,
        "league_changed": False,
    }
    before = {a: (t.id, t.updated_at) for a, t in _by_alias("nfl").items()}
    assert refresh_league_metadata.fn(league="nfl")["updated"] == 0
    assert {a: (t.id, t.updated_at) for a, t in _by_alias("nfl").items()} == before

    data["conferences"][0]["divisions"][0]["teams"][1].update(name="Sharks", market="New Jersey")
    _write(path, {"nfl": data})
    out = refresh_league_teams.fn(league="nfl")
    assert (out["created"], out["updated"]) == (0, 1)
    after = _by_alias("nfl")
    assert (after["NYJ"].name, after["NYJ"].market) == ("Sharks", "New Jersey")
    assert after["NYJ"].id == before["NYJ"][0] and after["NYJ"].updated_at > before["NYJ"][1]
    # The teams document has no conference or division: the hierarchy's stay.
    assert (after["NYJ"].conference, after["NYJ"].division) == ("AFC", "AFC East")
    assert after["BUF"].updated_at == before["BUF"][1]
    assert Team.select().count() == 3


def test_a_renamed_league_and_a_moved_team_are_updated_by_the_metadata_refresh(srsim, pointed_at, tmp_path):
    from actors.refresh import refresh_league_metadata

    data = _nfl_data()
    path = _write(tmp_path / "leagues.json", {"nfl": data})
    pointed_at(srsim([], league_file=path))
    refresh_league_metadata.fn(league="nfl")
    data["league"]["name"] = "The NFL"
    bears = data["conferences"][1]["divisions"][0]["teams"].pop()
    data["conferences"][0]["divisions"][0]["teams"].append(bears)
    _write(path, {"nfl": data})
    out = refresh_league_metadata.fn(league="nfl")
    assert (out["updated"], out["league_changed"]) == (1, True)
    assert League.get(League.name == "nfl").full_name == "The NFL"
    chi = _by_alias("nfl")["CHI"]
    assert (chi.conference, chi.division) == ("AFC", "AFC East")


def test_refresh_league_seasons_stores_each_season_idempotently(srsim, pointed_at, tmp_path):
    from actors.refresh import refresh_league_seasons

    seasons = [
        {"id": "s-2030-reg", "year": 2030, "type": "REG", "status": "closed", "start_date": "2030-09-05"},
        {"id": "s-2030-pst", "year": 2030, "type": "PST", "status": "scheduled", "end_date": "2031-02-09"},
    ]
    path = _write(tmp_path / "leagues.json", {"nfl": _nfl_data(seasons=seasons)})
    server = srsim([], league_file=path)
    pointed_at(server)
    out = refresh_league_seasons.fn(league="nfl")
    assert (out["seen"], out["created"], out["updated"]) == (2, 2, 0)
    assert server.schedule_requests == ["/nfl/trial/league/seasons.json"]
    rows = {s.sr_id: s for s in Season.select()}
    assert (rows["s-2030-reg"].year, rows["s-2030-reg"].type, rows["s-2030-reg"].status) == (
        2030,
        "REG",
        "closed",
    )
    assert rows["s-2030-reg"].start_date == date(2030, 9, 5) and rows["s-2030-reg"].end_date is None
    assert rows["s-2030-pst"].end_date == date(2031, 2, 9)
    assert refresh_league_seasons.fn(league="nfl")["updated"] == 0
    seasons[1]["status"] = "inprogress"
    _write(path, {"nfl": _nfl_data(seasons=seasons)})
    assert refresh_league_seasons.fn(league="nfl")["updated"] == 1
    assert Season.get(Season.sr_id == "s-2030-pst").status == "inprogress"


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (-10, 10, 2041),  # a season covering today
        (5, 100, 2041),  # off-season: the next season to start
        (-100, -5, None),  # only a finished season: fall back to season_year
    ],
)
def test_the_season_schedule_refresh_reads_the_active_season_of_the_seasons_table(
    srsim, pointed_at, tmp_path, start, end, expected
):
    from actors.refresh import refresh_league_schedule, refresh_league_seasons
    from models.season_calendar import season_year

    today = datetime.now(UTC).date()
    season = {
        "id": "s-2041",
        "year": 2041,
        "type": "REG",  # srsim serves it as {"code": "REG"}
        "start_date": (today + timedelta(days=start)).isoformat(),
        "end_date": (today + timedelta(days=end)).isoformat(),
    }
    game = GameScript(sr_id=str(uuid.uuid4()), league="nhl", start_after=600)
    nhl = {**_nfl_data(), "seasons": [season]}
    server = srsim([game], league_file=_write(tmp_path / "leagues.json", {"nhl": nhl}))
    pointed_at(server)
    refresh_league_seasons.fn(league="nhl")
    assert refresh_league_schedule.fn(league="nhl")["created"] == 1
    year = expected or season_year("nhl", today)
    assert server.schedule_requests[-1] == f"/nhl/trial/games/{year}/REG/schedule.json"
    assert Match.get(Match.sr_id == game.sr_id).league.name == "nhl"


def test_without_a_league_file_srsim_serves_the_teams_of_its_games_in_mlbs_shape(srsim, pointed_at):
    import requests

    from actors.refresh import refresh_league_metadata, refresh_league_seasons, refresh_league_teams
    from models.season_calendar import season_year
    from srsim.leagues import team_id

    game = GameScript(sr_id=str(uuid.uuid4()), league="mlb", start_after=600)
    server = srsim([game])
    pointed_at(server)
    doc = requests.get(f"{server.base_url}/mlb/trial/league/hierarchy.json", timeout=10).json()
    assert "leagues" in doc and "abbr" in doc["leagues"][0]["divisions"][0]["teams"][0]
    assert refresh_league_metadata.fn(league="mlb")["created"] == 2
    assert refresh_league_teams.fn(league="mlb")["updated"] == 0
    assert refresh_league_seasons.fn(league="mlb")["created"] == 1
    teams = _by_alias("mlb")
    (home_name, home_market, home_alias), (_, _, away_alias) = game.home, game.away
    assert set(teams) == {home_alias, away_alias}
    assert (teams[home_alias].name, teams[home_alias].market) == (home_name, home_market)
    assert teams[home_alias].sr_id == team_id(home_alias)  # the id of the push payloads' home team
    assert Season.get().year == season_year("mlb", datetime.now(UTC).date())
    assert League.get(League.name == "mlb").alias == "MLB"


def test_an_existing_league_in_another_case_is_refreshed_not_duplicated(srsim, pointed_at, tmp_path):
    from actors.refresh import refresh_league_metadata

    League.create(name="NFL")
    pointed_at(srsim([], league_file=_write(tmp_path / "leagues.json", {"nfl": _nfl_data()})))
    refresh_league_metadata.fn(league="nfl")
    assert [(x.name, x.sr_id) for x in League.select()] == [("NFL", "nfl-league-id")]


def test_provider_errors_are_schedule_fetch_errors_and_the_api_key_is_never_logged(
    srsim, pointed_at, tmp_path, caplog
):
    from actors.refresh import refresh_league_metadata, refresh_league_seasons, refresh_league_teams

    key = "sekret-league-key-123"
    path = _write(tmp_path / "leagues.json", {"nfl": _nfl_data(), "nhl": {"league": {"name": "no id"}}})
    server = srsim([], league_file=path, api_key=key)
    caplog.set_level(logging.DEBUG)

    pointed_at(server, sportradar_api_key=SecretStr("wrong-" + key))
    with pytest.raises(ScheduleFetchError, match=r"league hierarchy .* answered HTTP 401") as denied:
        refresh_league_metadata.fn(league="nfl")

    pointed_at(server, sportradar_api_key=SecretStr(key))
    with pytest.raises(ScheduleFetchError, match="answered HTTP 404"):
        refresh_league_teams.fn(league="nba")  # a league srsim knows nothing of
    with pytest.raises(ScheduleFetchError, match="has no league id"):
        refresh_league_seasons.fn(league="nhl")
    assert refresh_league_metadata.fn(league="nfl")["created"] == 3

    pointed_at(server, sportradar_base_url="http://127.0.0.1:9", sportradar_api_key=SecretStr(key))
    with pytest.raises(ScheduleFetchError, match="cannot fetch league teams"):
        refresh_league_teams.fn(league="nfl")

    assert not League.select().where(League.name == "nhl", League.sr_id.is_null(False)).exists()
    assert caplog.records and "league refresh" in caplog.text
    assert key not in caplog.text and key not in str(denied.value)


@pytest.mark.e2e
def test_the_league_refresh_actors_run_on_a_real_worker_against_srsim(
    srsim, start_worker, broker_queues, tmp_path
):
    from actors.refresh import refresh_league_metadata, refresh_league_seasons, refresh_league_teams

    seasons = [{"id": "s-2035", "year": 2035, "type": "REG", "start_date": "2035-09-06"}]
    server = srsim([], league_file=_write(tmp_path / "leagues.json", {"nfl": _nfl_data(seasons=seasons)}))
    start_worker(queues=("default",), threads=2, env={"SPORTRADAR_BASE_URL": server.base_url})
    refresh_league_metadata.send(league="nfl")
    refresh_league_teams.send(league="nfl")
    refresh_league_seasons.send(league="nfl")
    wait_for(
        lambda: (
            Team.select().where(Team.conference == "NFC").count() == 1
            and Season.select().where(Season.year == 2035).exists()
            and League.select().where(League.sr_id == "nfl-league-id").exists()
        ),
        timeout=60,
    )
    wait_for(lambda: len(server.schedule_requests) == 3, timeout=30)
    assert sorted(server.schedule_requests) == [
        "/nfl/trial/league/hierarchy.json",
        "/nfl/trial/league/seasons.json",
        "/nfl/trial/league/teams.json",
    ]
