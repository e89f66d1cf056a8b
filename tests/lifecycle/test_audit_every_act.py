"""Issue 35 item 2: the acts that wrote no entry write one now; a bad reason refuses the act before it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from models.audit import audit_entries
from models.listener_record import MatchListenerRecord


def test_a_cli_reason_that_is_not_utf8_is_a_usage_error_and_nothing_stops(db, make_match, subprocess_env):
    match = make_match(status="inprogress")
    record = MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "listeners",
            "stop",
            str(match.id),
            "--reason",
            os.fsdecode(b"bad \xff"),
        ],
        env=subprocess_env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert b"UTF-8" in done.stderr
    assert MatchListenerRecord.get_by_id(record.id).ended_at is None
    assert audit_entries() == []


def test_matches_add_leagues_add_and_roster_add_write_their_entries(kick, db):
    kick("leagues", "add", "mlb")
    added = kick(
        "matches",
        "add",
        "--league",
        "mlb",
        "--sr-id",
        "sr:match:35",
        "--scheduled",
        "2030-01-01T00:00:00Z",
        "--json",
    ).output
    kick("players", "roster", "add", "--league", "L1", "4046", "6794")
    entries = {e.action: e for e in audit_entries()}
    assert entries["league.add"].target == "league:mlb"
    assert entries["match.add"].target_id in added and entries["match.add"].after["sr_id"] == "sr:match:35"
    assert entries["roster.add"].after == {"sleeper_ids": ["4046", "6794"]}
