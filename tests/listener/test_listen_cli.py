"""``kickoff listen``: one listener in a subprocess, guarded and fenced like a worker start, the exit code."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from models import MatchListenerRecord
from models.coordination import CoordinationStore
from models.event_log import log_summary
from srsim.script import GameScript
from tests import intervals
from tests.waiting import wait_for


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


def _kickoff() -> str:
    return str(Path(sys.executable).with_name("kickoff"))


def _locks(settings, redis_client) -> CoordinationStore:
    """CoordinationStore whose start lock lives long enough for a test to look at it."""
    return CoordinationStore(
        redis_client, prefix=settings.redis_key_prefix, url=settings.redis_url, stale_seconds=120
    )


#: What holds the match before ``kickoff listen`` runs: (open row, start lock, pending key).
HOLDERS = {
    "worker run": (True, True, True),  # what a listener worker's run holds
    "start lock only": (False, True, False),
    "open row only": (True, False, False),  # a live listener elsewhere, e.g. between lock renewals
    "queued start": (False, False, True),  # dispatched, not yet taken by a worker
}


@pytest.mark.parametrize("held_by", list(HOLDERS))
def test_kickoff_listen_refuses_a_held_match_in_one_line_without_opening_a_stream(
    held_by, make_match, raw_feed, subprocess_env, settings, redis_client, tmp_path
):
    has_row, has_lock, has_pending = HOLDERS[held_by]
    feed = raw_feed(b"")
    match = make_match("mlb", status="inprogress")
    coordination = _locks(settings, redis_client)
    token = str(uuid.uuid4())
    if has_row:
        MatchListenerRecord.create(id=token, match=match.id, host="worker-host-7", pid=31337)
    if has_lock:
        assert coordination.locks.start_lock(match.id).acquire(token)
    if has_pending:
        assert coordination.barriers.claim_pending(match.id)
    data_dir = tmp_path / "data"
    env = dict(subprocess_env, SPORTRADAR_BASE_URL=feed.base_url, DATA_DIR=str(data_dir))
    done = subprocess.run(
        [_kickoff(), "listen", match.sr_id], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    if has_row:
        assert "worker-host-7" in lines[0] and "31337" in lines[0] and token in lines[0]
    elif has_lock:
        assert token in lines[0]
    else:
        assert "pending" in lines[0]
    assert feed.requests == [] and not data_dir.exists()
    rows = MatchListenerRecord.select().where(MatchListenerRecord.match == match.id)
    assert [(str(r.id), r.ended_at) for r in rows] == ([(token, None)] if has_row else [])
    assert coordination.locks.start_lock(match.id).adopt(token).owned() is has_lock
    assert (
        coordination.barriers.is_pending(match.id) is has_pending
    )  # a pending key it claimed was given back
    held = subprocess.run(
        [_kickoff(), "listen", match.sr_id, "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    out = json.loads(held.stdout)
    assert held.returncode == 1 and out["started"] is False and feed.requests == []
    named = out["held_by"].get("record_id", out["held_by"].get("token"))
    assert named == (token if has_row or has_lock else None)


def test_kickoff_listen_takes_the_lock_beats_obeys_a_stop_and_releases_everything(
    sim, make_match, subprocess_env, settings, redis_client, tmp_path
):
    from lifecycle.cleanup import stop_match_listener

    game = GameScript(
        sr_id=str(uuid.uuid4()), league="mlb", start_after=1.0, event_interval=0.2, event_count=100_000
    )
    server = sim([game])
    match = make_match("mlb", sr_id=game.sr_id, is_test=True, status="inprogress")
    env = dict(
        subprocess_env,
        SPORTRADAR_BASE_URL=server.base_url,
        DATA_DIR=str(tmp_path / "data"),
        **intervals.env("listen_subprocess"),
    )
    proc = subprocess.Popen(
        [_kickoff(), "listen", game.sr_id, "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    coordination = _locks(settings, redis_client)
    try:

        def open_row():
            return (
                MatchListenerRecord.select()
                .where(MatchListenerRecord.match == match.id, MatchListenerRecord.ended_at.is_null())
                .first()
            )

        row = wait_for(open_row, timeout=60, interval=0.1, what="an open row")
        assert coordination.client.get(coordination.start_lock_key(match.id)).decode() == str(row.id)
        assert coordination.barriers.is_pending(match.id)
        first_beat = row.heartbeat_at
        wait_for(
            lambda: open_row() and open_row().heartbeat_at > first_beat,
            timeout=60,
            interval=0.1,
            what="a heartbeat",
        )
        stop_match_listener(str(match.id), settings=settings, coordination=coordination)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 15, stderr[-2000:]
    out = json.loads(stdout.strip().splitlines()[-1])
    assert out["started"] is True and out["record_id"] == str(row.id) and out["exit_code"] == 15
    closed = MatchListenerRecord.get_by_id(row.id)
    assert closed.exit_code == 15 and closed.ended_at is not None
    assert coordination.client.get(coordination.start_lock_key(match.id)) is None
    assert not coordination.barriers.is_pending(match.id)


def test_kickoff_listen_of_an_unknown_match_records_the_archive_only(
    sim, db, subprocess_env, settings, redis_client, tmp_path
):
    # Events keep coming for 15 s: the simulator replays nothing, so a listener process that starts
    # slowly on a loaded machine must still find the game under way when it connects (then its
    # first backfill brings what it missed).
    game = GameScript(
        sr_id=str(uuid.uuid4()), league="mlb", start_after=1.0, event_interval=0.05, event_count=300
    )
    server = sim([game])
    env = dict(
        subprocess_env,
        SPORTRADAR_BASE_URL=server.base_url,
        DATA_DIR=str(tmp_path / "data"),
        LISTENER_STATUS_RELOAD_HEARTBEATS="4",
    )
    done = subprocess.run(
        [_kickoff(), "listen", game.sr_id, "--league", "mlb", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == out["exit_code"] == 13, done.stderr[-2000:]
    assert out["record_id"] is None and out["events"] >= 1 and Path(out["archive"]).is_file()
    assert MatchListenerRecord.select().count() == 0
    assert list(redis_client.scan_iter(match=f"{settings.redis_key_prefix}*")) == []


def test_kickoff_listen_match_id_logs_the_run_against_the_named_match_while_following_sr_id(
    sim, make_match, subprocess_env, tmp_path
):
    """``--match-id`` (make listen's LISTEN_MATCH_ID): the stream of SR_ID, the row of the named match."""
    # Events keep coming for 15 s, as in the test above: a subprocess that boots after the game ended
    # gets only heartbeats, backfills the events and never sees the closing status, which only the
    # stream brings for this match (exit 10, not 13: CI met that with 10 events after 6 s).
    game = GameScript(
        sr_id=str(uuid.uuid4()), league="mlb", start_after=1.0, event_interval=0.05, event_count=300
    )
    server = sim([game])
    # A live match whose (UUID) sr_id srsim does not serve: its status follows the stream it is given.
    named = make_match("mlb", sr_id=str(uuid.uuid4()), status="inprogress")
    data_dir = tmp_path / "data"
    env = dict(
        subprocess_env,
        SPORTRADAR_BASE_URL=server.base_url,
        DATA_DIR=str(data_dir),
        LISTENER_STATUS_RELOAD_HEARTBEATS="4",
    )
    done = subprocess.run(
        [_kickoff(), "listen", game.sr_id, "--match-id", named.sr_id, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 13, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["match_id"] == str(named.id) and out["events"] >= 1
    assert out["archive"] == f"event log of match {named.id}"  # recorded under the named match
    # the whole game under the named match: what the stream brought, and what a late boot missed and
    # the backfill brought (``events`` counts the stream's alone)
    assert log_summary(named.id).events == game.event_count
    [row] = MatchListenerRecord.select().where(MatchListenerRecord.match == named.id)
    assert str(row.id) == out["record_id"] and row.exit_code == 13
    unknown = str(uuid.uuid4())
    refused = subprocess.run(
        [_kickoff(), "listen", game.sr_id, "--match-id", unknown],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and unknown in refused.stderr
    assert MatchListenerRecord.select().count() == 1


@pytest.mark.parametrize("known", [True, False], ids=["known-match", "unknown-match"])
def test_kickoff_listen_sr_env_picks_the_feeds_access_level(
    known, raw_feed, make_match, subprocess_env, tmp_path
):
    feed = raw_feed(b"", redirect=False, status=404)
    sr_id = str(uuid.uuid4())
    if known:
        make_match("mlb", sr_id=sr_id, status="inprogress")
    env = dict(
        subprocess_env,
        SPORTRADAR_BASE_URL=feed.base_url,
        DATA_DIR=str(tmp_path / "data"),
        LISTENER_SR_ENV="trial",
    )
    for sr_env in ("production", "trial"):
        done = subprocess.run(
            [_kickoff(), "listen", sr_id, "--league", "mlb", "--sr-env", sr_env],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 11, done.stdout + done.stderr
        path, _headers = feed.requests[-1]
        assert path.startswith(f"/mlb/{sr_env}/stream/"), path
    assert MatchListenerRecord.select().count() == (2 if known else 0)
    bad = subprocess.run(
        [_kickoff(), "listen", sr_id, "--sr-env", "staging"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "staging" in bad.stderr and len(feed.requests) == 2
