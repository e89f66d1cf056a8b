"""The audit log from the CLI: who and why of an act, reasons required, list filters, export, append-only."""

from __future__ import annotations

import json
import os
import pwd
import socket
import uuid
from datetime import timedelta

import peewee
import pytest

from config.clock import utcnow
from models.audit import Actor, audit_entries, prune_audit, record_audit
from models.db import database
from models.listener_record import MatchListenerRecord

ME = f"{pwd.getpwuid(os.getuid()).pw_name}@{socket.gethostname()}"


def test_a_cli_stop_is_audited_with_the_os_user_and_its_reason(kick, make_match):
    match = make_match(status="inprogress")
    MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    kick("listeners", "stop", str(match.id), "--reason", "feed is garbage")
    [entry] = audit_entries(action="listener.stop")
    assert entry.who == ME and entry.who_key_id is None and entry.reason == "feed is garbage"
    assert entry.target == f"match:{match.id}"
    assert entry.before == {"auto_dispatch": True} and entry.after["auto_dispatch"] is False


@pytest.mark.parametrize(
    "args",
    [
        ("listeners", "stop", "{id}"),
        ("listeners", "start", "{id}", "--force"),
        ("enqueue", "start_match_listener", "--kw", "match_id={id}", "--kw", "force=true"),
    ],
    ids=["stop", "force-start", "enqueue-force-start"],
)
def test_a_stop_or_force_start_without_a_reason_is_a_usage_error(kick, make_match, args):
    match = make_match(status="inprogress")
    out = kick(*(a.format(id=match.id) for a in args), code=2)
    assert "reason" in out.output
    out = kick(*(a.format(id=match.id) for a in args), "--reason", "  ", code=2)
    assert audit_entries() == [] and MatchListenerRecord.select().count() == 0


def test_dispatch_off_and_on_record_before_and_after(kick, make_match):
    match = make_match()
    kick("matches", "set-dispatch", str(match.id), "off", "--reason", "maintenance")
    kick("matches", "set-dispatch", str(match.id), "on")
    on, off = audit_entries(match_id=str(match.id))
    assert (off.action, off.before, off.after, off.reason) == (
        "match.dispatch_off",
        {"auto_dispatch": True},
        {"auto_dispatch": False},
        "maintenance",
    )
    assert (on.action, on.after, on.reason) == ("match.dispatch_on", {"auto_dispatch": True}, None)


def test_the_list_filters_and_its_json_shape(kick, make_match):
    one, two = make_match(), make_match()
    api = Actor.api_key(str(uuid.uuid4()), "ci-bot")
    record_audit(actor=api, action="match.edit", target_kind="match", target_id=str(one.id), reason="r1")
    record_audit(actor=Actor.cli(), action="match.edit", target_kind="match", target_id=str(two.id))
    record_audit(actor=api, action="listeners.sweep", target_kind="listeners", target_id=None)

    def listed(*args: str) -> list[dict]:
        doc = json.loads(kick("audit", "list", *args, "--json").output)
        assert list(doc) == ["entries"]
        return doc["entries"]

    everything = listed()
    assert [e["action"] for e in everything] == ["listeners.sweep", "match.edit", "match.edit"]
    assert set(everything[0]) == {
        "at",
        "who",
        "action",
        "target",
        "title",
        "reason",
        "before",
        "after",
        "request_id",
        "who_key_id",
    }
    assert [e["target"] for e in listed("--who", "ci-bot")] == ["listeners", f"match:{one.id}"]
    assert [e["who"] for e in listed("--action", "match.edit", "--match", str(two.id))] == [ME]
    assert len(listed("--limit", "1")) == 1
    future = (utcnow() + timedelta(hours=1)).isoformat()
    assert listed("--since", future) == []
    assert "ci-bot" in kick("audit", "list").output
    kick("audit", "list", "--since", "yesterday", code=2)


def test_export_prints_one_json_object_per_line_oldest_first(kick):
    for n in range(3):
        record_audit(actor=Actor.cli(), action="run.cancel", target_kind="run", target_id=str(n))
    since = (utcnow() - timedelta(hours=1)).isoformat()
    lines = kick("audit", "export", "--since", since).output.splitlines()
    assert [json.loads(line)["target"] for line in lines] == ["run:0", "run:1", "run:2"]


def test_the_table_refuses_update_and_delete_but_the_retention_prunes(kick, db):
    record_audit(actor=Actor.cli(), action="run.cancel", target_kind="run", target_id="old")
    record_audit(actor=Actor.cli(), action="run.cancel", target_kind="run", target_id="new")
    for statement in ("UPDATE audit_log SET who = 'someone else'", "DELETE FROM audit_log"):
        with pytest.raises(peewee.DatabaseError, match="append-only"), database.atomic():
            database.execute_sql(statement)
    # the trigger's retention setting only lets a delete through; an update is refused even then
    with pytest.raises(peewee.DatabaseError, match="append-only"), database.atomic():
        database.execute_sql("SET LOCAL kickoff.audit_retention = 'on'")
        database.execute_sql("UPDATE audit_log SET who = 'someone else'")
    with database.atomic():
        database.execute_sql("ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only")
        database.execute_sql("UPDATE audit_log SET at = now() - interval '500 days' WHERE target_id = 'old'")
        database.execute_sql("ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only")
    assert prune_audit(days=400) == 1
    assert [(e.action, e.target_id) for e in audit_entries()] == [
        ("audit.prune", None),
        ("run.cancel", "new"),
    ]
    assert json.loads(kick("audit", "prune", "--json").output) == {"deleted": 0, "days": 400}
    [by_cli, *_] = audit_entries()
    assert (by_cli.action, by_cli.who, by_cli.after) == (
        "audit.prune",
        Actor.cli().name,
        {"days": 400, "deleted": 0},
    )
    kick("audit", "prune", "--days", "1", code=1)  # below the floor (AUDIT_RETENTION_DAYS): refused
    with pytest.raises(peewee.DatabaseError, match="append-only"), database.atomic():
        database.execute_sql("DELETE FROM audit_log")


def test_league_switches_and_api_keys_are_audited_without_the_key(kick, db):
    kick("leagues", "add", "nfl")
    kick("leagues", "disable", "nfl", "--reason", "off season")
    created = json.loads(kick("apikeys", "create", "--name", "ci", "--scope", "read", "--json").output)
    kick("apikeys", "revoke", created["id"], "--reason", "leaked")
    revoke, create, disable, add = audit_entries()
    assert (add.action, add.target, add.after, add.who) == ("league.add", "league:nfl", {"enabled": True}, ME)
    assert (disable.action, disable.target, disable.reason) == ("league.disable", "league:nfl", "off season")
    assert disable.before == {"enabled": True} and disable.after == {"enabled": False}
    assert (create.action, create.target_id, create.after) == (
        "apikey.create",
        created["id"],
        {"name": "ci", "scope": "read", "leagues": None},
    )
    assert created["key"] not in json.dumps([e.as_dict() for e in audit_entries()])
    assert (revoke.action, revoke.reason, revoke.who) == ("apikey.revoke", "leaked", ME)


def test_the_match_card_shows_one_timeline_of_its_runs_gaps_and_operator_acts(kick, make_match):
    match = make_match(status="inprogress")
    start = utcnow() - timedelta(minutes=5)
    MatchListenerRecord.create(
        id=str(uuid.uuid4()),
        match=match.id,
        created_at=start,
        ended_at=start + timedelta(minutes=1),
        exit_code=14,
        exit_reason="worker lease expired",
        gaps=2,
        gap_seconds=8.5,
        events_backfilled=17,
    )
    MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id, created_at=start + timedelta(minutes=2))
    kick("listeners", "stop", str(match.id), "--reason", "bad feed")
    timeline = json.loads(kick("matches", "show", str(match.id), "--json").output)["timeline"]
    kinds = [t["kind"] for t in timeline]
    # the stop's entry is written before the stop closes the run (newest first: the run's end, then the act)
    assert (
        kinds[:2] == ["run_ended", "act"]
        and kinds.count("run_started") == 2
        and kinds.count("run_ended") == 2
    )
    stop = timeline[1]
    assert (stop["what"], stop["who"], stop["reason"]) == ("listener.stop", ME, "bad feed")
    ended = [t["what"] for t in timeline if t["kind"] == "run_ended"]
    assert any(
        "exit 14 (worker lease expired); 2 gaps, 8.5s without a stream, 17 backfilled" in w for w in ended
    )
    assert [t["at"] for t in timeline] == sorted((t["at"] for t in timeline), reverse=True)
    text = kick("matches", "show", str(match.id)).output
    assert "timeline:" in text and "listener.stop by " in text and ": bad feed" in text
