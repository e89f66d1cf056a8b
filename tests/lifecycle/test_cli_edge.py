"""Bad input at the CLI edge: one line, non-zero exit, no traceback, nothing stored or enqueued."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lifecycle.helpers import add_match_args, reload


def one_error_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert lines[0].startswith("Error: ") and "Traceback" not in output
    return lines[0]


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("listener_max_consecutive_heartbeats=abc", "listener_max_consecutive_heartbeats: Input should be"),
        ("listener_reconnect_attempts=-3", "listener_reconnect_attempts: Input should be greater than"),
        ("database_url=postgresql://elsewhere/db", "refused listener setting(s) in --override: database_url"),
        (
            "sportradar_base_url=http://elsewhere",
            "refused listener setting(s) in --override: sportradar_base_url",
        ),
        (
            "listener_body=tests.lifecycle.bodies:Exploding",
            "refused listener setting(s) in --override: listener_body",
        ),
        ("data_dir=/tmp", "refused listener setting(s) in --override: data_dir"),
        ("bogus=1", "unknown listener setting(s) in --override: bogus"),
    ],
)
def test_listeners_start_with_a_bad_override_enqueues_nothing(
    kick, make_match, broker_queues, coordination, override, says
):
    match = make_match()
    line = one_error_line(kick("listeners", "start", str(match.id), "--override", override, code=3).output)
    assert says in line and "--override" in line
    assert broker_queues("match_listeners") == 0
    assert not coordination.barriers.is_pending(match.id)
    assert reload(match).start_message_id is None


def test_matches_add_with_a_bad_setting_stores_nothing(kick):
    from models.match import Match

    kick("leagues", "add", "nfl")
    out = kick(*add_match_args("sr:match:bad", "--setting", "listener_max_bad_lines=abc"), code=3).output
    assert "listener_max_bad_lines" in one_error_line(out)
    assert Match.select().count() == 0


@pytest.mark.parametrize("name", ["bad/name", "", "..", ".hidden", "a b"])
def test_leagues_add_refuses_a_name_that_is_not_one_archive_directory(kick, name):
    from models.league import League

    line = one_error_line(kick("leagues", "add", name, code=2).output)
    assert "not allowed" in line
    assert League.select().count() == 0


def test_league_names_are_unique_case_insensitively(kick):
    from models.league import League

    kick("leagues", "add", "nfl")
    assert "league 'nfl' already exists" in one_error_line(kick("leagues", "add", "NFL", code=4).output)
    assert [lg.name for lg in League.select()] == ["nfl"]
    kick(*add_match_args("sr:match:ci", league="NFL"))


def test_the_database_refuses_a_case_duplicate_league_too(db):
    import peewee

    from models.league import League

    League.create(name="mlb")
    with pytest.raises(peewee.IntegrityError):
        League.create(name="MLB")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["sweep_stale_match_listeners", "--kw", "bogus=1"], "unexpected keyword argument 'bogus'"),
        (["refresh_league_schedule"], "missing a required argument: 'league'"),
        (["start_match_listener"], "missing a required argument: 'match_id'"),
        (
            [
                "start_match_listener",
                "--kw",
                "match_id=x",
                "--kw",
                'overrides={"listener_reconnect_attempts": -3}',
            ],
            "listener_reconnect_attempts",
        ),
    ],
)
def test_enqueue_with_kwargs_the_actor_does_not_take_sends_nothing(kick, broker_queues, args, says):
    line = one_error_line(kick("enqueue", *args, code=2 if "overrides" not in args[-1] else 3).output)
    assert says in line
    assert broker_queues("default") == 0 and broker_queues("match_listeners") == 0


def test_dispatch_with_test_and_live_is_a_usage_error(kick, make_match, broker_queues):
    make_match(is_test=True)
    line = one_error_line(kick("listeners", "dispatch", "--test", "--live", code=2).output)
    assert "--test and --live contradict each other" in line
    assert broker_queues("match_listeners") == 0


def test_leagues_enable_and_disable_print_the_change(kick):
    kick("leagues", "add", "nfl")
    assert kick("leagues", "disable", "NFL").output.strip() == "league nfl disabled (was enabled)"
    out = json.loads(kick("leagues", "enable", "nfl", "--json").output)
    assert out["enabled"] is True and out["was_enabled"] is False
    assert "no league named 'xfl'" in one_error_line(kick("leagues", "enable", "xfl", code=2).output)


def test_leagues_list_has_headers_and_says_when_empty(kick):
    assert kick("leagues", "list").output.strip() == "no leagues (kickoff leagues add NAME)"
    kick("leagues", "add", "a-very-long-league-name")
    kick("leagues", "add", "nfl", "--disabled")
    lines = kick("leagues", "list").output.strip().splitlines()
    assert lines[0].split() == ["name", "state"]
    assert lines[1].index("enabled") == lines[2].index("disabled") == lines[0].index("state")
    assert len(kick("leagues", "list", "--limit", "1").output.strip().splitlines()) == 2


def test_matches_show_prints_settings_runs_and_barriers(kick, make_match, coordination):
    from tests.lifecycle.helpers import dead_run

    match = make_match(sr_id="sr:match:show", listener_start_settings={"listener_dry_run": True})
    assert "no runs" in kick("matches", "show", "sr:match:show").output
    from config.settings import MatchListenerEnvironment
    from models.coordination import CoordinationStore

    b = CoordinationStore.from_settings(MatchListenerEnvironment(_env_file=None), client=coordination.client)
    dead_run(match, b)
    b.barriers.record_failed_attempt(match.id)
    d = json.loads(kick("matches", "show", str(match.id), "--json").output)
    assert d["sr_id"] == "sr:match:show" and d["settings"] == {"listener_dry_run": True}
    assert len(d["runs"]) == 1 and d["barriers"]["attempts"] == 1
    text = kick("matches", "show", "sr:match:show").output
    assert "settings:      listener_dry_run=True" in text and d["runs"][0]["record_id"] in text


def test_matches_edit_checks_settings_before_saving(kick, make_match):
    match = make_match(sr_id="sr:match:edit")
    out = json.loads(
        kick(
            "matches",
            "edit",
            "sr:match:edit",
            "--title",
            "New",
            "--setting",
            "listener_dry_run=true",
            "--json",
        ).output
    )
    assert out["changed"] == {"title": "New", "settings": {"listener_dry_run": True}}
    line = one_error_line(
        kick("matches", "edit", str(match.id), "--setting", "listener_max_bad_lines=abc", code=3).output
    )
    assert "listener_max_bad_lines" in line
    assert reload(match).listener_start_settings == {"listener_dry_run": True}
    assert "unset" not in kick("matches", "edit", str(match.id), "--unset", "listener_dry_run").output
    assert reload(match).listener_start_settings == {}
    assert "nothing changed" in kick("matches", "edit", str(match.id)).output


def test_matches_list_is_a_table_with_headers_and_says_when_empty(kick, make_match):
    assert kick("matches", "list").output.strip() == "no matches (kickoff matches add ...)"
    make_match(sr_id="sr:match:" + "x" * 60)
    make_match(sr_id="sr:match:2")
    lines = kick("matches", "list").output.strip().splitlines()
    assert lines[0].split() == ["id", "sr_id", "title", "league", "scheduled", "status", "badge", "flags"]
    assert lines[1].index(" nfl ") == lines[2].index(" nfl ") == lines[0].index(" league ")
    assert len(json.loads(kick("matches", "list", "--limit", "1", "--json").output)["matches"]) == 1


@pytest.mark.parametrize("key", ["sportradar_base_url", "listener_body", "sentry_dsn", "data_dir"])
def test_matches_edit_and_add_refuse_a_setting_only_the_environment_sets_with_exit_3(kick, make_match, key):
    from models.match import Match

    match = make_match(sr_id="sr:match:allow", listener_start_settings={"listener_dry_run": True})
    line = one_error_line(kick("matches", "edit", str(match.id), "--setting", f"{key}=x", code=3).output)
    assert f"refused listener setting(s) in --setting: {key}" in line
    assert reload(match).listener_start_settings == {"listener_dry_run": True}
    before = Match.select().count()
    line = one_error_line(kick(*add_match_args("sr:match:new", "--setting", f"{key}=x"), code=3).output)
    assert key in line and Match.select().count() == before


def test_check_fails_naming_each_match_that_stores_a_refused_setting(kick, make_match):
    fine = make_match(listener_start_settings={"listener_dry_run": True, "srsim_unserved": True})
    poisoned = make_match(
        listener_start_settings={"sportradar_base_url": "http://elsewhere.example", "listener_dry_run": True}
    )
    body = make_match(listener_start_settings={"listener_body": "x:Y", "data_dir": "/tmp"})
    doc = json.loads(kick("check", "--json", code=1).output)
    [found] = [c for c in doc["checks"] if c["name"] == "match settings"]
    assert found["status"] == "FAIL" and "2 match(es)" in found["detail"]
    assert f"match {poisoned.id}: sportradar_base_url" in found["detail"]
    assert f"match {body.id}: data_dir, listener_body" in found["detail"]
    assert str(fine.id) not in found["detail"]
    kick("matches", "edit", str(poisoned.id), "--unset", "sportradar_base_url")
    kick("matches", "edit", str(body.id), "--unset", "listener_body", "--unset", "data_dir")
    doc = json.loads(kick("check", "--json", code=1).output)  # the workers and the feed still fail
    [found] = [c for c in doc["checks"] if c["name"] == "match settings"]
    assert found["status"] == "ok"


@pytest.mark.parametrize(
    "argv",
    [["listen", "sr:match:down"], ["listeners", "status"], ["matches", "list"]],
    ids=["listen", "listeners-status", "matches-list"],
)
def test_with_postgresql_down_a_command_prints_the_database_url_line_and_exits_5(subprocess_env, argv):
    """The connect itself is inside the driver's translation: one line naming DATABASE_URL, no
    traceback, the unavailable exit (issue 38: ``kickoff listen`` printed an unexpected OperationalError)."""
    env = {**subprocess_env, "DATABASE_URL": "postgresql://postgres@127.0.0.1:1/kickoff_down"}
    kickoff = str(Path(sys.executable).parent / "kickoff")
    out = subprocess.run([kickoff, *argv], env=env, capture_output=True, text=True, timeout=60)
    lines = (out.stdout + out.stderr).strip().splitlines()
    assert out.returncode == 5, lines
    assert lines == [
        "Error: cannot reach PostgreSQL at DATABASE_URL=postgresql://postgres@127.0.0.1:1/kickoff_down: "
        'connection to server at "127.0.0.1", port 1 failed: Connection refused'
    ]
