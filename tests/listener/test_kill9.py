"""A listener process killed with SIGKILL mid-game leaves an archive the next run repairs and appends to."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from listener.archive import archive_path, read_events
from listener.body import ListenerContext
from listener.exit_codes import ExitCode
from srsim.script import GameScript
from tests.listener.conftest import run_listener
from tests.waiting import wait_for


def _sequence(events: list[dict]) -> list[int]:
    return [e["payload"]["event"]["sequence_number"] for e in events if "payload" in e]


def test_kill_9_mid_game_then_restart_leaves_valid_json_with_new_events_appended(
    sim, listener_settings, subprocess_env, tmp_path: Path
):
    game = GameScript(
        sr_id=str(uuid.uuid4()), league="mlb", start_after=8.0, event_interval=0.04, event_count=90
    )
    server = sim([game])
    data_dir = tmp_path / "data"
    env = dict(subprocess_env)
    env.update(
        {
            "DATA_DIR": str(data_dir),
            "SPORTRADAR_BASE_URL": server.base_url,
            "LISTENER_ARCHIVE_FLUSH_EVENTS": "1",
            "LISTENER_ARCHIVE_FLUSH_SECONDS": "0",
        }
    )
    kickoff = str(Path(os.sys.executable).with_name("kickoff"))
    proc = subprocess.Popen(
        [kickoff, "listen", game.sr_id, "--league", "mlb"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    path = archive_path(data_dir, "mlb", game.sr_id)
    try:
        wait_for(  # kick-off is 8 s after srsim starts
            lambda: path.exists() and len(read_events(path)) >= 20,
            timeout=30,
            interval=0.02,
            what="20 events archived",
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    before = read_events(path)
    assert len(before) >= 20
    # A write cut in the middle of an event, as a kill during write() leaves it.
    data = path.read_bytes()
    path.write_bytes(data[:-2] + b',{"payload":{"game":{"id":"' + game.sr_id[:10].encode())
    with pytest.raises(ValueError):
        json.loads(path.read_bytes())

    settings = listener_settings(
        data_dir=data_dir,
        sportradar_base_url=server.base_url,
        listener_sr_request_match_uuid=game.sr_id,
        listener_sr_url_league="mlb",
    )
    out = run_listener(
        ListenerContext(match_id="", record_id=None, is_test=False, settings=settings), timeout=20
    )
    assert out.code == ExitCode.NOT_IN_PROGRESS
    assert out.listener.archive.repaired
    after = json.loads(path.read_bytes())  # valid JSON again
    assert after[: len(before)] == before
    assert len(after) > len(before)
    # The archive is in arrival order: the live stream's messages in game order, and the events sent
    # while no run streamed merged from the play-by-play as the restarted run's backfill arrives
    # (before or after its first live message: a race the stream is never held up for).
    appended = after[len(before) :]
    live = _sequence([e for e in appended if "backfilled" not in e.get("kickoff", {})])
    assert live == sorted(live)
    seq = _sequence(after)
    assert sorted(seq) == list(range(game.total_events))  # every event once: nothing lost, nothing repeated
