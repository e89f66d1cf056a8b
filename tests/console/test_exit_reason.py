"""The reason a real listener gives for its exit reaches its row, the board's --json and the console."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from models.listener_record import MatchListenerRecord
from srsim.script import GameScript
from tests.listener.conftest import sim

__all__ = ["sim"]

pytestmark = pytest.mark.services

KICKOFF = str(Path(sys.executable).with_name("kickoff"))


def test_an_unserved_match_records_the_feeds_404_as_its_reason_everywhere(
    sim, make_match, subprocess_env, console_server, console_keys, signed_in, tmp_path
):
    # srsim serves another game: the stream of this match answers 404 "no such match".
    server = sim([GameScript(sr_id=str(uuid.uuid4()), league="mlb", start_after=60, event_count=1)])
    match = make_match("mlb", sr_id=str(uuid.uuid4()), status="inprogress")
    env = dict(subprocess_env, SPORTRADAR_BASE_URL=server.base_url, DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run(
        [KICKOFF, "listen", match.sr_id, "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 11, done.stdout + done.stderr
    assert "feed answered HTTP 404" in done.stderr  # what the listener logged
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["reason"].startswith("feed answered HTTP 404 at ")

    [row] = MatchListenerRecord.select().where(MatchListenerRecord.match == match.id)
    assert row.exit_code == 11 and row.exit_reason == said["reason"]

    status = subprocess.run(
        [KICKOFF, "listeners", "status", "--match", str(match.id), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    [entry] = json.loads(status.stdout)["matches"]
    assert (entry["exit_code"], entry["reason"]) == (11, row.exit_reason)

    op = signed_in(console_keys["operator"])
    board = op.client.get("/").text
    card = op.client.get(f"/matches/{match.id}").text
    for page in (board, card):
        assert "feed answered HTTP 404 at " in page and "data error" not in page
