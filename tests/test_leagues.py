"""One declaration per league (models.leagues): everything else reads it, and nothing else names a league."""

from __future__ import annotations

import ast
import logging
import re
from datetime import date

import pytest

from models.leagues import (
    Cadence,
    LeagueDeclaration,
    declaration,
    declared,
    registered,
    september_week,
    with_cadence,
)
from tests.project import ROOT, product_modules

REGISTRY = ROOT / "models" / "leagues.py"


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _names_a_league(value: str, names: set[str]) -> bool:
    """A string names a league when it is one (any case), a path segment of one (``/nfl/``) or a
    comma-separated list holding one (``mlb,nhl``); prose that mentions one as an example does not."""
    text = value.strip().lower()
    if text in names:
        return True
    if any(re.search(rf"(^|/){re.escape(n)}(/|$)", text) for n in names):
        return True
    return "," in text and bool(set(text.replace(" ", "").split(",")) & names)


def test_no_module_but_the_declarations_names_a_league():
    names = {d.name for d in declared()} | {d.alias.lower() for d in declared()}
    found = []
    for path in product_modules():
        if path == REGISTRY:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            is_text = isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            if is_text and _names_a_league(node.value, names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not found, "a league named outside models/leagues.py (use its declaration):\n" + "\n".join(found)


@pytest.mark.parametrize("value", ["nfl", "NHL", "/mlb/trial/x", "/players/nba", "mlb,nhl"])
def test_the_check_sees_a_league_named_as_a_value_a_path_or_a_list(value):
    assert _names_a_league(value, {"mlb", "nfl", "nhl", "nba"})


@pytest.mark.parametrize("value", ['"HOU @ KC (mlb)"', "nfl_team", "the {league} segment"])
def test_the_check_lets_prose_and_other_words_be(value):
    assert not _names_a_league(value, {"mlb", "nfl", "nhl", "nba"})


def test_the_scheduler_refreshes_each_declared_league_and_no_other():
    from scheduler.table import PERIODIC

    per_league = ("refresh_league_metadata", "refresh_league_teams", "refresh_league_seasons")
    for actor in (*per_league, "refresh_league_schedule"):
        leagues = [e.kwargs["league"] for e in PERIODIC if e.actor == actor]
        assert leagues == [d.name for d in declared()], actor


def test_each_league_is_refreshed_daily_or_weekly_by_its_own_week_rule():
    daily, weekly = with_cadence(Cadence.DAILY), with_cadence(Cadence.WEEKLY)
    assert set(daily) | set(weekly) == set(declared()) and not set(daily) & set(weekly)
    assert all(d.week_rule is not None for d in weekly) and all(d.week_rule is None for d in daily)


def test_a_second_weekly_league_gets_its_own_week_rule_not_the_first_ones():
    from models.season_calendar import week_of

    other = LeagueDeclaration(
        name="ufl",
        alias="UFL",
        cadence=Cadence.WEEKLY,
        season_start_month=2,
        week_rule=lambda day: (day.year, 7),
        sim_model="srsim.models:Drives",
        pipeline="listener.pipelines:DrivePipeline",
        unit="drive",
    )
    with registered(other):
        assert other in with_cadence(Cadence.WEEKLY)
        assert week_of("ufl", date(2025, 10, 1)) == (2025, 7)
        assert week_of("nfl", date(2025, 10, 1)) != (2025, 7)
    assert declaration("ufl") is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", "N F L", "lowercase URL segment"),
        ("season_start_month", 13, "1..12"),
        ("week_rule", september_week(), "weekly league needs a week rule"),
        ("pipeline", "listener.pipelines", "module:attr"),
    ],
)
def test_a_malformed_declaration_is_refused_naming_what_is_wrong(field, value, message):
    fields = {
        "name": "xfl",
        "alias": "XFL",
        "cadence": Cadence.DAILY,
        "season_start_month": 1,
        "sim_model": "srsim.models:Drives",
        "pipeline": "listener.pipelines:DrivePipeline",
        "unit": "drive",
    }
    with pytest.raises(ValueError, match=message):
        LeagueDeclaration(**{**fields, field: value})


def test_each_declared_pipeline_and_sim_model_can_be_imported():
    import pkgutil

    for d in declared():
        assert callable(pkgutil.resolve_name(d.pipeline)), d.name
        assert callable(pkgutil.resolve_name(d.sim_model)), d.name


def test_an_undeclared_league_is_recorded_only_and_said_once(caplog):
    from listener.pipeline import RECORD_ONLY, pipeline_for

    caplog.set_level(logging.WARNING, logger="listener.pipeline")
    assert pipeline_for("", "cricket-test", match_id="m1") == RECORD_ONLY
    assert pipeline_for("", "cricket-test", match_id="m2") == RECORD_ONLY
    said = [r for r in caplog.records if "cricket-test" in r.getMessage()]
    assert len(said) == 1 and "recorded only" in said[0].getMessage()


def test_a_declared_league_gets_its_pipeline_unless_the_setting_names_one_for_every_match():
    from listener.pipeline import pipeline_for

    for d in declared():
        assert pipeline_for("", d.name.upper()) == d.pipeline
        assert pipeline_for("tests.x:Y", d.name) == "tests.x:Y"


def test_the_play_by_play_and_push_paths_come_from_the_declaration_unless_overridden():
    from config.settings import MatchListenerEnvironment
    from listener.play_by_play import play_by_play_url
    from models.leagues import push_path

    s = MatchListenerEnvironment(_env_file=None, sportradar_base_url="http://feed", listener_sr_env="trial")
    for d in declared():
        path = d.play_by_play_path.format(league=d.name, access=s.listener_sr_env, sr_id="g1")
        assert play_by_play_url(s, league=d.name, sr_id="g1") == "http://feed" + path
        assert push_path("", d.name) == d.push_path
    assert push_path("/elsewhere", declared()[0].name) == "/elsewhere"
    undeclared = play_by_play_url(s, league="cricket-test", sr_id="g1")
    assert undeclared.endswith("/cricket-test/trial/games/g1/pbp.json")


def test_kickoff_check_warns_about_each_league_row_without_a_declaration(make_match):
    from cli.check import WARN, _leagues

    assert _leagues().status == "ok"
    make_match(declared()[0].name)
    make_match("cricket-test")
    make_match("cricket-test")
    check = _leagues()
    assert check.status == WARN and check.detail.count("cricket-test") == 1
    assert "recorded only" in check.detail and declared()[0].name not in check.detail.split(":")[0]
