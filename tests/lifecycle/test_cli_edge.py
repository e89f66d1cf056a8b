"""Bad input at the CLI edge: one line, non-zero exit, no traceback, nothing stored or enqueued."""

from __future__ import annotations

import json

import pytest

from tests.lifecycle.helpers import reload


def one_error_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert lines[0].startswith("Error: ") and "Traceback" not in output
    return lines[0]


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("listener_heartbeat_interval_seconds=abc", "listener_heartbeat_interval_seconds: Input should be"),
        ("listener_reconnect_attempts=-3", "listener_reconnect_attempts: Input should be greater than"),
        ("database_url=postgresql://elsewhere/db", "database_url: a process setting"),
        ("bogus=1", "unknown listener setting(s) in --override: bogus"),
    ],
)
def test_listeners_start_with_a_bad_override_enqueues_nothing(
    kick, make_match, broker_queues, barriers, override, says
):
    match = make_match()
    line = one_error_line(kick("listeners", "start", str(match.id), "--override", override, code=1).output)
    assert says in line and "--override" in line
    assert broker_queues("match_listeners") == 0
    assert not barriers.is_pending(match.id)
    assert "message_id" not in (reload(match).listener_start_settings or {})


def test_matches_add_with_a_bad_setting_stores_nothing(kick):
    from models.match import Match

    kick("leagues", "add", "nfl")
    out = kick(
        "matches",
        "add",
        "--league",
        "nfl",
        "--sr-id",
        "sr:match:bad",
        "--scheduled",
        "2030-01-01T18:00:00Z",
        "--setting",
        "listener_heartbeat_interval_seconds=abc",
        code=1,
    ).output
    assert "listener_heartbeat_interval_seconds" in one_error_line(out)
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
    assert "league 'nfl' already exists" in one_error_line(kick("leagues", "add", "NFL", code=1).output)
    assert [lg.name for lg in League.select()] == ["nfl"]
    kick("matches", "add", "--league", "NFL", "--sr-id", "sr:match:ci", "--scheduled", "2030-01-01T18:00:00Z")


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
    line = one_error_line(kick("enqueue", *args, code=2 if "overrides" not in args[-1] else 1).output)
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
