"""The operator CLI: leagues, matches, listeners, enqueue (in-process CliRunner on the real services)."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.lifecycle.helpers import (
    BOARD_ENTRY_KEYS,
    add_match_args,
    dead_run,
    enqueue_forced_start,
    reload,
    rows_of,
)


def test_leagues_add_prints_what_it_did_and_list_shows_it(kick):
    assert kick("leagues", "add", "nfl").output.strip() == "league nfl added (enabled)"
    assert json.loads(kick("leagues", "add", "mlb", "--disabled", "--json").output)["enabled"] is False
    listed = json.loads(kick("leagues", "list", "--json").output)["leagues"]
    assert [(lg["name"], lg["enabled"]) for lg in listed] == [("mlb", False), ("nfl", True)]
    dup = kick("leagues", "add", "nfl", code=4)  # a conflict
    assert "already exists" in dup.output and len(dup.output.strip().splitlines()) == 1


def test_matches_add_prints_the_internal_id_and_json_gives_an_object(kick):
    kick("leagues", "add", "nfl")
    plain = kick(*add_match_args("sr:match:1"))
    uuid.UUID(plain.output.strip())
    out = kick(
        *add_match_args("sr:match:2", scheduled="2030-01-01T20:00:00+02:00"),
        "--status",
        "inprogress",
        "--test",
        "--no-auto-dispatch",
        "--setting",
        "listener_dry_run=true",
        "--json",
    )
    created = json.loads(out.output)
    assert set(created) == {"id"}
    listed = {m["sr_id"]: m for m in json.loads(kick("matches", "list", "--json").output)["matches"]}
    assert listed["sr:match:2"]["is_test"] and not listed["sr:match:2"]["auto_dispatch"]
    assert listed["sr:match:2"]["scheduled"].startswith("2030-01-01T18:00:00")


def test_matches_add_with_an_unknown_league_is_one_line_exit_2(kick):
    out = kick(*add_match_args("x", league="nope"), code=2)
    assert "no league named 'nope'" in out.output and len(out.output.strip().splitlines()) == 1


def test_set_dispatch_turns_auto_dispatch_off_and_on(kick, make_match):
    match = make_match()
    assert "auto-dispatch off (was on)" in kick("matches", "set-dispatch", str(match.id), "off").output
    assert reload(match).auto_dispatch_listener is False
    out = json.loads(kick("matches", "set-dispatch", str(match.id), "on", "--json").output)
    assert out == {"match_id": str(match.id), "auto_dispatch": True, "was": False}


@pytest.mark.parametrize(
    "args",
    [
        ("listeners", "stop", "{id}", "--reason", "drill"),
        ("listeners", "start", "{id}"),
        ("listeners", "status", "--match", "{id}"),
        ("matches", "set-dispatch", "{id}", "on"),
    ],
    ids=["stop", "start", "status", "set-dispatch"],
)
def test_an_unknown_match_id_is_one_clear_line_and_exit_2(kick, args):
    missing = str(uuid.uuid4())
    out = kick(*(a.format(id=missing) for a in args), code=2)
    assert missing in out.output and len(out.output.strip().splitlines()) == 1


def test_an_unknown_sr_id_is_exit_2_and_a_known_one_names_the_match(kick, make_match):
    out = kick("listeners", "stop", "sr:match:nope", "--reason", "drill", code=2)
    assert "no match with id or sr_id 'sr:match:nope'" in out.output
    match = make_match(sr_id="sr:match:42")
    listed = json.loads(kick("listeners", "status", "--match", "sr:match:42", "--json").output)
    assert [m["match_id"] for m in listed["matches"]] == [str(match.id)]


def test_listeners_dispatch_json_reports_counts_and_sends_starts(kick, make_match, broker_queues):
    make_match()
    make_match(is_test=True)
    out = json.loads(kick("listeners", "dispatch", "--test", "--json").output)
    assert out["enqueued"] == 1 and out["skipped"] == 0 and out["eligible"] == 1
    again = json.loads(kick("listeners", "dispatch", "--json").output)
    assert again["enqueued"] == 1 and again["skipped"] == 1
    assert broker_queues("match_listeners") == 2
    assert "0 enqueued, 2 already pending" in kick("listeners", "dispatch").output


def test_listeners_start_saves_the_message_id_and_refuses_a_double_start(kick, make_match, broker_queues):
    match = make_match()
    out = json.loads(
        kick("listeners", "start", str(match.id), "--override", "listener_dry_run=true", "--json").output
    )
    assert out["enqueued"] and reload(match).start_message_id == out["message_id"]
    assert "already queued or running" in kick("listeners", "start", str(match.id)).output
    forced = kick("listeners", "start", str(match.id), "--force", "--reason", "drill").output
    assert "(force)" in forced
    assert broker_queues("match_listeners") == 2


def test_listeners_start_with_an_unknown_override_is_one_line(kick, make_match):
    match = make_match()
    out = kick("listeners", "start", str(match.id), "--override", "bogus=1", code=3)
    assert "bogus" in out.output and len(out.output.strip().splitlines()) == 1


def test_listeners_stop_and_sweep_print_what_they_did(kick, make_match, coordination):
    from config.settings import MatchListenerEnvironment
    from models.coordination import CoordinationStore

    b = CoordinationStore.from_settings(MatchListenerEnvironment(_env_file=None), client=coordination.client)
    stopped = make_match()
    dead_run(stopped, b)
    out = json.loads(kick("listeners", "stop", str(stopped.id), "--reason", "drill", "--json").output)
    assert out["rows_closed"] == 1 and out["auto_dispatch_was"] is True
    swept = make_match()
    dead_run(swept, b)
    text = kick("listeners", "sweep", "--heartbeat-stale-seconds", "0").stdout
    assert text.startswith("sweep: 1 rows abandoned (14) on 1 matches")
    assert rows_of(swept)[0].exit_code == 14 and rows_of(stopped)[0].exit_code == 15


def test_listeners_status_json_lists_the_latest_run_per_match(kick, make_match, coordination):
    from config.settings import MatchListenerEnvironment
    from models.coordination import CoordinationStore

    b = CoordinationStore.from_settings(MatchListenerEnvironment(_env_file=None), client=coordination.client)
    match = make_match(sr_id="sr:match:status")
    dead_run(match, b)
    b.barriers.record_failed_attempt(match.id)
    [row] = json.loads(kick("listeners", "status", "--json").output)["matches"]
    assert set(row) == BOARD_ENTRY_KEYS
    assert row["badge"] == "Stale" and row["attempts"] == 1 and row["exit_code"] is None
    assert row["heartbeat_age_s"] >= 500 and row["auto_dispatch"] is True
    kick("listeners", "sweep")
    [row] = json.loads(kick("listeners", "status", "--match", str(match.id), "--json").output)["matches"]
    assert row["badge"] == "Abandoned" and row["exit_code"] == 14 and row["reason"] == "heartbeat stale"
    assert "sr:match:status" in kick("listeners", "status").output


def test_enqueue_sends_any_actor_on_its_queue(kick, broker_queues):
    out = json.loads(
        kick("enqueue", "sweep_stale_match_listeners", "--kw", "heartbeat_stale_seconds=0", "--json").output
    )
    assert out["queue"] == "default" and out["kwargs"] == {"heartbeat_stale_seconds": 0}
    assert broker_queues("default") == 1


def test_enqueue_start_match_listener_goes_through_the_start_path(kick, make_match, broker_queues):
    match = make_match()
    out = json.loads(enqueue_forced_start(kick, match.id, "--json").output)
    assert out["message_id"] == reload(match).start_message_id
    assert broker_queues("match_listeners") == 1
    by_sr_id = json.loads(enqueue_forced_start(kick, match.sr_id, "--json").output)
    assert by_sr_id["kwargs"]["match_id"] == str(match.id) and broker_queues("match_listeners") == 2


def test_enqueue_an_unknown_actor_is_exit_2(kick):
    assert "no actor named 'nope'" in kick("enqueue", "nope", code=2).output


def test_a_manual_dispatch_defaults_to_within_minutes_0(kick, make_match, broker_queues):
    """A one-shot takes matches due now; a match starting in 5 minutes needs --within-minutes."""
    from datetime import timedelta

    from config.clock import utcnow

    make_match(scheduled=utcnow() + timedelta(minutes=5))
    out = json.loads(kick("listeners", "dispatch", "--json").output)
    assert out["eligible"] == 0 and out["enqueued"] == 0
    out = json.loads(kick("listeners", "dispatch", "--within-minutes", "10", "--json").output)
    assert out["eligible"] == 1 and out["enqueued"] == 1
    assert "default: 0;" in " ".join(kick("listeners", "dispatch", "--help").output.split())


def _queued_kwargs(lifecycle_env, queue: str) -> list[dict]:
    from models.coordination import connect_redis

    client = connect_redis(lifecycle_env["BROKER_URL"])
    raw = client.hvals(f"{lifecycle_env['BROKER_NAMESPACE']}:{queue}.msgs")
    return [json.loads(m)["kwargs"] for m in raw]


def test_enqueue_dispatch_defaults_to_within_minutes_0_and_keeps_an_explicit_one(
    kick, lifecycle_env, broker_queues
):
    kick("enqueue", "dispatch_upcoming_match_listeners", "--kw", "is_test=true")
    kick("enqueue", "dispatch_upcoming_match_listeners", "--kw", "within_minutes=30")
    kwargs = sorted(_queued_kwargs(lifecycle_env, "default"), key=lambda k: k["within_minutes"])
    assert kwargs == [{"is_test": True, "within_minutes": 0}, {"within_minutes": 30}]


def test_the_scheduler_dispatch_keeps_the_settings_window():
    from scheduler.table import PERIODIC

    [entry] = [e for e in PERIODIC if e.name == "dispatch_upcoming_match_listeners"]
    assert "within_minutes" not in entry.kwargs  # the actor falls back to LISTENER_DISPATCH_WITHIN_MINUTES


def test_a_match_added_twice_is_a_conflict_exit_4_in_one_line(kick):
    kick("leagues", "add", "nfl")
    kick(*add_match_args("sr:match:twice"))
    dup = kick(*add_match_args("sr:match:twice"), code=4)
    assert "a match with sr_id 'sr:match:twice' already exists" in dup.output
    assert len(dup.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"status": "sideways"}, "status"),
        ({"set_settings": {"message_id": "m"}}, "settings"),
        ({"unset_settings": ["listener_dry_run"]}, "settings"),
    ],
    ids=["unknown-status", "bookkeeping-key", "unset-what-is-not-set"],
)
def test_a_match_edit_kickoff_cannot_make_is_invalid_and_changes_nothing(make_match, change, field):
    from api.errors import status_of
    from lifecycle.errors import InvalidMatchEdit
    from lifecycle.match_admin import edit_match

    match = make_match(status="scheduled")
    with pytest.raises(InvalidMatchEdit) as info:
        edit_match(str(match.id), **change)
    assert info.value.field == field and status_of(info.value) == 422
    assert reload(match).status == "scheduled" and reload(match).listener_start_settings == {}
