"""``kickoff listen``: one listener in a subprocess, a lifecycle row for a known match, the exit code."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from models import MatchListenerRecord
from srsim.script import GameScript


def test_kickoff_listen_follows_a_known_match_to_exit_13_and_closes_its_row(sim, make_match, subprocess_env):
    game = GameScript(
        sr_id=str(uuid.uuid4()), league="mlb", start_after=6.0, event_interval=0.05, event_count=10
    )
    server = sim([game])
    match = make_match("mlb", sr_id=game.sr_id, is_test=True)
    env = dict(subprocess_env, SPORTRADAR_BASE_URL=server.base_url, LISTENER_STATUS_RELOAD_HEARTBEATS="4")
    kickoff = str(Path(sys.executable).with_name("kickoff"))
    done = subprocess.run(
        [kickoff, "listen", game.sr_id, "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 13, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["exit_code"] == 13 and out["events"] >= 1
    [row] = MatchListenerRecord.select().where(MatchListenerRecord.match == match.id)
    assert row.exit_code == 13 and row.ended_at is not None and str(row.id) == out["record_id"]
    assert "test-api-key-never-printed" not in done.stdout + done.stderr
