"""The listener board (``kickoff listeners status``) against real PostgreSQL and Redis."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from config.clock import utcnow
from lifecycle.board import NO_RUN, BoardCache, listener_board
from lifecycle.cleanup import stop_match_listener
from lifecycle.lease import WorkerLease
from models.listener_record import MatchListenerRecord
from tests import intervals
from tests.lifecycle.helpers import BOARD_ENTRY_KEYS, dispatch, reload
from tests.waiting import wait_for

#: Board thresholds for these tests: Late after 60 s, Stale after 180 s.
THRESHOLDS = intervals.fields("production")
INTERVAL, STALE = (
    THRESHOLDS["listener_heartbeat_interval_seconds"],
    THRESHOLDS["listener_heartbeat_stale_seconds"],
)


@pytest.fixture
def bsettings(lsettings):
    return lsettings.model_copy(update=THRESHOLDS)


def _same(entry) -> dict:
    """An entry's fields but the heartbeat age, which moves between two readings."""
    return {k: v for k, v in entry.as_dict().items() if k != "heartbeat_age_s"}


@pytest.fixture
def board(bsettings, lcoordination, db):
    """The board by match id; a full board is read twice, fresh and through the test's one BoardCache
    (kept from reading to reading, as a live board keeps it), and both must agree."""
    cache = BoardCache()

    def read(**kw):
        entries = listener_board(settings=bsettings, coordination=lcoordination, **kw)
        if "match_id" not in kw and "match_ids" not in kw:
            cached = listener_board(settings=bsettings, coordination=lcoordination, cache=cache, **kw)
            assert [_same(e) for e in cached] == [_same(e) for e in entries]
            for fresh, kept in zip(entries, cached, strict=True):
                assert (fresh.heartbeat_age_s is None) == (kept.heartbeat_age_s is None)
        return {e.match_id: e for e in entries}

    return read


def a_row(
    match, *, age: float = 0.0, created_age: float | None = None, worker_lease: str | None = None, **closed
) -> str:
    """A lifecycle row whose heartbeat is ``age`` seconds old; keywords close it (exit_code, reason)."""
    now = utcnow()
    record_id = str(uuid.uuid4())
    fields = {}
    if closed:
        fields = {"ended_at": now, "exit_code": closed["exit_code"], "exit_reason": closed.get("reason")}
    created = now - timedelta(seconds=age if created_age is None else created_age)
    MatchListenerRecord.create(
        id=record_id,
        match=match.id,
        created_at=created,
        heartbeat_at=now - timedelta(seconds=age),
        host="host-a",
        pid=4242,
        worker_lease=worker_lease,
        **fields,
    )
    return record_id


def test_a_match_without_a_row_but_with_attempts_is_on_the_board(board, make_match, lcoordination):
    match = make_match(status="closed")
    lcoordination.barriers.record_failed_attempt(match.id)
    lcoordination.barriers.record_failed_attempt(match.id)
    entry = board()[str(match.id)]
    assert entry.badge == NO_RUN and entry.record_id is None and entry.attempts == 2
    assert not entry.exhausted and not entry.pending and entry.league == "nfl"


def test_an_exhausted_match_without_a_row_is_on_the_board(board, make_match, lcoordination):
    match = make_match(status="closed")
    for _ in range(lcoordination.attempt_cap):
        lcoordination.barriers.record_failed_attempt(match.id)
    entry = board()[str(match.id)]
    assert entry.exhausted and entry.attempts == lcoordination.attempt_cap and entry.badge == NO_RUN


def test_a_pending_start_without_a_row_is_on_the_board_and_active(board, make_match, lcoordination):
    pending = make_match(status="scheduled")
    quiet = make_match(status="closed")
    a_row(quiet, age=500, exit_code=13, reason="not in progress")
    assert lcoordination.barriers.claim_pending(pending.id)
    entry = board()[str(pending.id)]
    assert entry.pending and entry.badge == NO_RUN and entry.auto_dispatch
    assert set(board(active_only=True)) == {str(pending.id)}


def test_a_match_stopped_while_its_start_was_queued_shows_auto_dispatch_false(
    board, bsettings, lcoordination, make_match, outbox
):
    match = make_match(status="inprogress")
    assert dispatch(settings=bsettings, coordination=lcoordination, send=outbox).enqueued == 1
    assert board()[str(match.id)].pending
    stop_match_listener(str(match.id), settings=bsettings, coordination=lcoordination)
    entry = board()[str(match.id)]
    assert entry.auto_dispatch is False and entry.badge == NO_RUN and not entry.pending
    # Still listed once the stop flag expired: dispatch would start it but auto-dispatch is off.
    lcoordination.stops.clear_stop_flag(match.id)
    assert board()[str(match.id)].auto_dispatch is False
    # A finished match with auto-dispatch off and nothing else is not on the board.
    done = make_match(status="closed", auto_dispatch_listener=False)
    assert str(done.id) not in board()
    assert reload(match).auto_dispatch_listener is False


def test_an_open_row_wins_over_a_later_closed_one(board, make_match):
    match = make_match(status="inprogress")
    open_id = a_row(match, age=5, created_age=600)
    a_row(match, age=10, created_age=10, exit_code=14, reason="superseded by forced start")
    entry = board()[str(match.id)]
    assert entry.record_id == open_id and entry.badge == "Running" and entry.exit_code is None
    assert entry.heartbeat_age_s is not None and entry.host == "host-a" and entry.pid == 4242


def test_late_between_running_and_stale_and_when_the_worker_lease_is_gone(board, make_match, lcoordination):
    ages = {"Running": 10, "Late": 2 * INTERVAL + 40, "Stale": STALE + 60}
    rows = {}
    for badge, age in ages.items():
        match = make_match(status="inprogress")
        rows[badge] = (str(match.id), a_row(match, age=age))
    entries = board()
    assert {badge: entries[mid].badge for badge, (mid, _) in rows.items()} == {b: b for b in ages}
    # A fresh heartbeat under a live worker lease is Running; under a lease gone from Redis, Late.
    lease = WorkerLease(locks=lcoordination.locks, ttl_seconds=30, fence_margin_seconds=1)
    live, dead = make_match(status="inprogress"), make_match(status="inprogress")
    a_row(live, age=1, worker_lease=lease.renew().lease_id)
    a_row(dead, age=1, worker_lease="a-lease-gone-from-redis")
    entries = board()
    assert entries[str(live.id)].badge == "Running" and entries[str(dead.id)].badge == "Late"


def test_a_cached_board_rereads_only_on_a_change_and_follows_time_alone(
    bsettings, lcoordination, db, make_match
):
    """Badges move with time alone: a reused reading still turns Running into Late at the threshold."""
    cache = BoardCache()

    def read():
        return {
            e.match_id: e for e in listener_board(settings=bsettings, coordination=lcoordination, cache=cache)
        }

    running, closed = make_match(status="inprogress"), make_match(status="closed")
    a_row(running, age=2 * INTERVAL - 1.5)
    a_row(closed, exit_code=0)
    first = read()
    assert first[str(running.id)].badge == "Running" and cache.full_reads == 1
    late = wait_for(lambda: read()[str(running.id)].badge == "Late", timeout=20, what="Late by time alone")
    assert late and cache.full_reads == 1
    again = read()
    assert again[str(closed.id)] is first[str(closed.id)]  # an entry that cannot move is kept as it was
    lcoordination.barriers.record_failed_attempt(
        closed.id
    )  # a Redis counter: no SQL re-read, the entry rebuilt
    assert read()[str(closed.id)].attempts == 1 and cache.full_reads == 1
    MatchListenerRecord.update(ended_at=utcnow(), exit_code=15).where(
        MatchListenerRecord.match == running.id
    ).execute()
    assert read()[str(running.id)].badge == "Stopped" and cache.full_reads == 2


def test_the_reason_column_shows_the_closing_reason(board, make_match):
    match = make_match(status="inprogress")
    a_row(match, age=30, exit_code=11, reason="HTTP 404")
    entry = board()[str(match.id)]
    assert (entry.badge, entry.exit_code, entry.reason) == ("Ended", 11, "HTTP 404")


def test_the_board_shows_the_newest_runs_gaps_and_the_last_archive_verification(board, make_match, kick):
    from models.match import Match

    match = make_match(status="closed", sr_id="sr:match:gappy")
    record_id = a_row(match, age=30, exit_code=0, reason="game over")
    MatchListenerRecord.update(gaps=2, gap_seconds=3.14, events_backfilled=14, events_unrecovered=1).where(
        MatchListenerRecord.id == record_id
    ).execute()
    stored = {
        "ok": False,
        "events": 9,
        "missing": ["x"] * 3,
        "missing_count": 120,
        "extra": [],
        "extra_count": 0,
    }
    Match.update(archive_verification={**stored, "differing": [], "differing_count": 0}).where(
        Match.id == match.id
    ).execute()
    plain = make_match(status="inprogress")
    a_row(plain)

    entry, other = board()[str(match.id)], board()[str(plain.id)]
    assert (entry.gaps, entry.gap_seconds, entry.events_backfilled, entry.events_unrecovered) == (
        2,
        3.1,
        14,
        1,
    )
    assert (entry.archive_ok, entry.archive_missing, entry.archive_text) == (False, 120, "120 missing")
    assert entry.gaps_text == "2 (3.1s, 14 back, 1 lost)"
    assert (other.gaps_text, other.archive_text, other.archive_ok) == ("0", "-", None)
    [line] = [ln for ln in kick("listeners", "status").splitlines() if "sr:match:gappy" in ln]
    assert "2 (3.1s, 14 back, 1 lost)" in line and "120 missing" in line
    shown = json.loads(kick("matches", "show", str(match.id), "--json"))
    assert shown["runs"][0]["gaps"] == 2 and shown["archive"]["verification"]["missing_count"] == 120
    assert "120 missing (9 events)" in kick("matches", "show", str(match.id))


@pytest.mark.unit
def test_gap_and_archive_cells_are_compact():
    from lifecycle.board import archive_cell, gaps_cell

    assert gaps_cell(None, None, None) == "-" and gaps_cell(0, 0.0, 0) == "0"
    assert gaps_cell(2, 3.14, 14) == "2 (3.1s, 14 back)"
    assert gaps_cell(1, 60.0, 0, 1, 0) == "1 (60.0s, 0 back, 1 unrecovered)"
    assert archive_cell(None, None, None, None) == "-" and archive_cell(True, 0, 0, 0) == "ok"
    assert archive_cell(False, 3, 0, 1) == "3 missing, 1 differing"


def test_an_unknown_match_is_not_found_and_a_known_one_is_shown_with_nothing(board, make_match):
    from models.errors import MatchNotFound

    with pytest.raises(MatchNotFound):
        board(match_id=str(uuid.uuid4()))
    match = make_match(status="scheduled")
    [entry] = board(match_id=str(match.id)).values()
    assert entry.badge == NO_RUN and entry.attempts == 0 and entry.auto_dispatch


# -- the CLI --------------------------------------------------------------------------


@pytest.fixture
def kick(db, redis_client, lifecycle_env, monkeypatch):
    monkeypatch.setenv("LISTENER_HEARTBEAT_INTERVAL_SECONDS", str(INTERVAL))
    monkeypatch.setenv("LISTENER_HEARTBEAT_STALE_SECONDS", str(STALE))
    runner = CliRunner()

    def run(*args: str, code: int = 0):
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.output

    return run


def test_status_prints_a_header_and_a_reason_column(kick, make_match, lcoordination):
    ended = make_match(status="closed", sr_id="sr:match:ended")
    a_row(ended, age=30, exit_code=11, reason="HTTP 404")
    late = make_match(status="inprogress", sr_id="sr:match:late")
    a_row(late, age=2 * INTERVAL + 30)
    header, *lines = kick("listeners", "status").splitlines()
    assert header.split() == [
        "match_id",
        "sr_id",
        "title",
        "league",
        "status",
        "badge",
        "exit",
        "hb_age_s",
        "att",
        "exh",
        "pend",
        "dispatch",
        "gaps",
        "archive",
        "reason",
    ]
    [ended_line] = [ln for ln in lines if "sr:match:ended" in ln]
    assert ended_line.endswith("HTTP 404") and " Ended " in ended_line and " 11 " in ended_line
    [late_line] = [ln for ln in lines if "sr:match:late" in ln]
    assert " Late " in late_line


def test_status_json_is_one_object_and_match_shows_a_match_without_runs(kick, make_match, lcoordination):
    match = make_match(status="scheduled")
    empty = json.loads(kick("listeners", "status", "--json"))
    assert empty["matches"] == [] and empty["count"] == 0
    [entry] = json.loads(kick("listeners", "status", "--match", str(match.id), "--json"))["matches"]
    assert set(entry) == BOARD_ENTRY_KEYS and entry["badge"] == NO_RUN and entry["match_id"] == str(match.id)
    assert str(match.id) in kick("listeners", "status", "--match", str(match.id))
    lcoordination.barriers.claim_pending(match.id)
    other = make_match(status="closed")
    a_row(other, age=100, exit_code=13, reason="not in progress")
    listed = json.loads(kick("listeners", "status", "--active", "--json"))["matches"]
    assert [e["match_id"] for e in listed] == [str(match.id)]
    assert len(json.loads(kick("listeners", "status", "--json"))["matches"]) == 2


def _read_lines(stream, out: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        out.put(line)
    out.put(None)


def test_status_watch_redraws_until_ctrl_c_and_exits_0(
    make_match, subprocess_env, lifecycle_env, lcoordination
):
    match = make_match(status="inprogress", sr_id="sr:match:watched")
    a_row(match, age=1)
    env = {**subprocess_env, **lifecycle_env}
    kickoff = str(Path(sys.executable).with_name("kickoff"))
    proc = subprocess.Popen(
        [kickoff, "listeners", "status", "--watch", "0.5"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A suite started in the background inherits SIGINT ignored; Ctrl-C must reach the command.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        draws = matched = 0

        def redrawn_twice() -> bool:
            """Read the next line (1 s at most); true once two boards and the match were drawn."""
            nonlocal draws, matched
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                return False
            assert line is not None, proc.stderr.read() if proc.stderr else ""
            draws += line.startswith("listener board at ")
            matched += "sr:match:watched" in line
            return draws >= 2 and matched >= 2

        wait_for(redrawn_twice, timeout=60, interval=0, what="two redraws of the watched match")
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        err = proc.stderr.read() if proc.stderr else ""
        assert "Traceback" not in err and "Aborted" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_matches_list_shows_the_same_badge_as_the_board(kick, make_match, lcoordination):
    """Every badge, including Late (lease gone) and "-" (no run), as `listeners status` shows it."""
    lease = WorkerLease(locks=lcoordination.locks, ttl_seconds=30, fence_margin_seconds=1)
    rows = {
        "running": dict(age=1, worker_lease=lease.renew().lease_id),
        "late": dict(age=2 * INTERVAL + 30),
        "lease-gone": dict(age=1, worker_lease="a-lease-gone-from-redis"),
        "stale": dict(age=STALE + 60),
        "abandoned": dict(age=400, exit_code=14, reason="abandoned"),
        "stopped": dict(age=400, exit_code=15, reason="stopped"),
        "ended": dict(age=400, exit_code=13, reason="not in progress"),
    }
    expected = {
        "running": "Running",
        "late": "Late",
        "lease-gone": "Late",
        "stale": "Stale",
        "abandoned": "Abandoned",
        "stopped": "Stopped",
        "ended": "Ended",
        "no-run": NO_RUN,
    }
    for name, kw in rows.items():
        a_row(make_match(status="inprogress", sr_id=f"sr:match:{name}"), **kw)
    make_match(status="scheduled", sr_id="sr:match:no-run")
    listed = {m["sr_id"]: m for m in json.loads(kick("matches", "list", "--json"))["matches"]}
    board = {e["sr_id"]: e for e in json.loads(kick("listeners", "status", "--json"))["matches"]}
    assert {sr.split(":")[-1]: m["badge"] for sr, m in listed.items()} == expected
    for sr_id, entry in board.items():
        assert listed[sr_id]["badge"] == entry["badge"]
    text = {ln.split()[1]: ln.split() for ln in kick("matches", "list").splitlines()}
    assert text["sr_id"][6] == "badge"  # the header row (the matches made here have no title: "-")
    assert text["sr:match:stopped"][6] == "Stopped" and text["sr:match:lease-gone"][6] == "Late"
