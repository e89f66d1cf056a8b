"""Every row of the "Case catalog" (lifecycle cases), run in-process against PostgreSQL and Redis."""

from __future__ import annotations

import re
import signal
import sys
import uuid
from pathlib import Path

import pytest

from cli.processes import ChildProcess
from lifecycle.cleanup import stop_match_listener, sweep_stale_match_listeners
from lifecycle.dispatch import new_message_id
from models.badges import Badge
from models.event_log import messages_of
from models.listener_record import MatchListenerRecord
from srsim.script import GameScript
from tests import intervals
from tests.lifecycle.helpers import dead_run, dispatch, live_row, open_rows, quick, reload, rows_of, start
from tests.waiting import wait_for


def reload_row(row):
    return MatchListenerRecord.get_by_id(row.id)


def _dispatch(ctx, outbox, **kw):
    return dispatch(settings=ctx["settings"], coordination=ctx["coordination"], send=outbox, **kw)


def run_message(ctx, runner, message):
    from lifecycle.guarded_start import start_match_listener

    return runner(
        start_match_listener,
        message.match_id,
        message.overrides,
        message.force,
        message_id=message.message_id,
        **ctx,
    )


def test_normal_start_creates_a_running_row_holding_pending_and_start_lock_then_ends(
    make_match, ctx, outbox, runner
):
    match = make_match(listener_start_settings={"listener_test_duration_seconds": 1.0})
    assert _dispatch(ctx, outbox).enqueued == 1
    [message] = outbox.messages
    assert reload(match).start_message_id == message.message_id
    future = run_message(ctx, runner, message)
    [row] = wait_for(lambda: open_rows(match))
    assert row.badge(stale_after_seconds=60) is Badge.RUNNING
    assert ctx["coordination"].barriers.is_pending(match.id)
    assert ctx["coordination"].locks.start_lock(match.id).locked()
    result = future.result(timeout=5)
    assert result.exit_code == 0
    assert rows_of(match)[0].badge(stale_after_seconds=60) is Badge.ENDED
    assert (
        not ctx["coordination"].barriers.is_pending(match.id)
        and not ctx["coordination"].locks.start_lock(match.id).locked()
    )


def test_a_match_with_auto_dispatch_off_is_not_selected(make_match, ctx, outbox):
    make_match(auto_dispatch_listener=False)
    assert _dispatch(ctx, outbox).eligible == 0 and outbox.messages == []


def test_manual_force_start_clears_barriers_reacquires_them_and_keeps_auto_dispatch(make_match, ctx, runner):
    match = make_match(auto_dispatch_listener=False)
    b = ctx["coordination"]
    for _ in range(b.attempt_cap):
        b.barriers.record_failed_attempt(match.id)
    b.barriers.claim_pending(match.id)
    assert b.barriers.is_exhausted(match.id)
    b.stops.set_stop_flag(match.id)
    future = runner(start, match, force=True, **ctx)
    wait_for(lambda: open_rows(match))
    assert not b.barriers.is_exhausted(match.id) and b.barriers.attempts(match.id) == 0
    assert not b.stops.stop_flags_among([match.id])  # cleared ...
    assert b.locks.start_lock(match.id).locked() and b.barriers.is_pending(match.id)  # ... then re-acquired
    assert reload(match).auto_dispatch_listener is False
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=b)
    future.result(timeout=5)
    assert not b.barriers.is_pending(match.id) and not b.locks.start_lock(match.id).locked()


def test_manual_force_start_does_not_stop_or_double_a_live_listener(make_match, ctx, runner):
    match = make_match()
    first = runner(start, match, **ctx)
    [live] = wait_for(lambda: open_rows(match))
    result = start(match, force=True, **ctx)
    assert result.as_dict()["skipped_locked"] is True
    assert [r.id for r in open_rows(match)] == [live.id]
    assert not first.done()
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=ctx["coordination"])
    first.result(timeout=5)


@pytest.mark.parametrize("code", [0, 10, 13], ids=["clean-0", "max-heartbeats-10", "not-in-progress-13"])
def test_graceful_end_releases_barriers_clears_the_enqueue_id_and_is_not_re_enqueued(
    make_match, ctx, outbox, runner, code
):
    match = make_match(listener_start_settings=quick(listener_test_exit_code=code))
    _dispatch(ctx, outbox)
    result = run_message(ctx, runner, outbox.messages[0]).result(timeout=5)
    assert result.exit_code == code and result.success
    assert rows_of(match)[0].badge(stale_after_seconds=60) is Badge.ENDED
    assert reload(match).start_message_id is None
    assert (
        not ctx["coordination"].barriers.is_pending(match.id)
        and not ctx["coordination"].locks.start_lock(match.id).locked()
    )
    assert reload(match).auto_dispatch_listener is True
    match.apply_stream("closed")  # the game is over: no longer eligible
    assert _dispatch(ctx, outbox).eligible == 0


def _delay_markers(match) -> int:
    return sum(
        1
        for m in messages_of(match.id)
        if isinstance(m, dict) and m.get("kickoff", {}).get("marker") == "delay"
    )


def test_rain_delay_keeps_the_listener_running_and_dispatch_does_not_double_it(
    make_match, ctx, outbox, runner, srsim, monkeypatch
):
    """The real body (MatchListener) against srsim's feed, heartbeats only: at its status checks it
    reads Match.status; delayed keeps it up past the idle-heartbeat limit (each delayed check writes
    a delay marker and resets the counter), dispatch does not double it, and a postponement ends
    the same run with 13 (a success)."""
    game = GameScript(sr_id=str(uuid.uuid4()), league="mlb", start_after=600, event_count=3)
    server = srsim([game], heartbeat_seconds=0.05)
    limit = 4  # idle heartbeats before exit 10, unless a delayed status check resets the count
    for key, value in {
        "LISTENER_BODY": "listener.match_listener:MatchListener",
        "SPORTRADAR_BASE_URL": server.base_url,
        "LISTENER_MAX_CONSECUTIVE_HEARTBEATS": str(limit),
        "LISTENER_STATUS_RELOAD_HEARTBEATS": "2",
        **intervals.env("stream"),
    }.items():
        monkeypatch.setenv(key, value)
    match = make_match("mlb", sr_id=game.sr_id, status="delayed")  # Beat saw the rain delay
    future = runner(start, match, **ctx)
    [row] = wait_for(lambda: open_rows(match))
    # Three delayed checks are six idle heartbeats, past the limit of four: the counter was reset.
    wait_for(lambda: _delay_markers(match) >= 3 or future.done(), timeout=30, what="three delay markers")
    assert not future.done(), future.result()
    assert [r.id for r in open_rows(match)] == [row.id]
    assert reload(match).status == "delayed"  # the body reads the status, never writes it from heartbeats
    result = _dispatch(ctx, outbox)
    assert result.eligible == 0 and outbox.messages == []
    [row] = open_rows(match)
    assert row.badge(stale_after_seconds=60) is Badge.RUNNING
    match.apply_stream("postponed")
    result = future.result(timeout=30)
    assert result.exit_code == 13 and result.success and "postponed" in (result.reason or "")
    [row] = rows_of(match)
    assert row.exit_code == 13 and row.badge(stale_after_seconds=60) is Badge.ENDED
    assert ctx["coordination"].barriers.attempts(match.id) == 0


@pytest.mark.parametrize("code", [9, 11, 12, 77], ids=["exception-9", "data-11", "connection-12", "other"])
def test_a_failed_run_clears_pending_counts_an_attempt_and_dispatch_retries(
    make_match, ctx, outbox, runner, code
):
    match = make_match(listener_start_settings={"listener_force_exit_code": code})
    _dispatch(ctx, outbox)
    result = run_message(ctx, runner, outbox.messages[0]).result(timeout=5)
    assert not result.success and ctx["coordination"].barriers.attempts(match.id) == 1
    assert not ctx["coordination"].barriers.is_pending(match.id)
    assert reload(match).auto_dispatch_listener is True
    assert _dispatch(ctx, outbox).enqueued == 1


def test_unexpected_cancel_16_is_treated_like_other_failures(make_match, ctx, outbox, runner):
    """A real cancel that no operator asked for: the run loses its start lock (another holder's
    token), its heartbeat notices and cancels it; recorded 16, counted, barriers cleared."""
    match = make_match()
    b = ctx["coordination"]
    _dispatch(ctx, outbox)
    future = run_message(ctx, runner, outbox.messages[0])
    wait_for(lambda: open_rows(match))
    b.client.set(b.start_lock_key(match.id), "another-holder")  # the lock is no longer the run's
    result = future.result(timeout=30)
    assert result.exit_code == 16 and not result.success
    [row] = rows_of(match)
    assert row.exit_code == 16 and row.stopped_by is None
    assert row.badge(stale_after_seconds=60) is Badge.ENDED
    assert b.barriers.attempts(match.id) == 1
    assert b.locks.start_lock_holder(match.id) == "another-holder"  # never deletes a lock it does not own


@pytest.mark.parametrize("guard", ["fresh-open-row", "start-lock-held"])
def test_start_is_skipped_when_a_listener_is_already_active(make_match, ctx, guard):
    match = make_match()
    if guard == "fresh-open-row":
        live_row(match)
    else:
        ctx["coordination"].locks.start_lock(match.id).acquire("someone-else")
    b = ctx["coordination"]
    holder = b.locks.start_lock_holder(match.id)
    before = len(rows_of(match))
    result = start(match, **ctx)
    assert result.skipped == ("skipped_active" if guard == "fresh-open-row" else "skipped_locked")
    assert result.success
    assert len(rows_of(match)) == before
    # The barriers: the active run's start lock is its own still, nothing counted or exhausted.
    assert b.locks.start_lock_holder(match.id) == holder
    assert b.barriers.attempts(match.id) == 0 and not b.barriers.is_exhausted(match.id)


def test_start_exhausted_after_15_failures_dispatch_skips_until_force(make_match, ctx, outbox, runner):
    match = make_match(listener_start_settings={"listener_force_exit_code": 12})
    b = ctx["coordination"]
    for n in range(1, b.attempt_cap + 1):
        result = start(match, **ctx)
        assert result.attempts == n
    assert b.barriers.is_exhausted(match.id)
    assert _dispatch(ctx, outbox).exhausted == 1 and outbox.messages == []
    assert start(match, **ctx).as_dict()["skipped_exhausted"] is True
    forced = start(match, force=True, **ctx)
    assert (
        forced.exit_code == 12
        and b.barriers.attempts(match.id) == 1
        and not b.barriers.is_exhausted(match.id)
    )


def test_hard_kill_goes_stale_then_abandoned_clears_barriers_and_dispatch_restarts(
    make_match, ctx, outbox, srsim, subprocess_env, lifecycle_env, tmp_path
):
    """A real hard kill: ``kickoff listen`` (the worker's start path, in its own process) SIGKILLed
    mid-run writes nothing; its row goes Stale with its barriers orphaned, the sweep closes it
    Abandoned (14, not an operator stop), clears the barriers and dispatch starts the match again."""
    game = GameScript(sr_id=str(uuid.uuid4()), league="mlb", start_after=600, event_count=3)
    server = srsim([game], heartbeat_seconds=0.2)
    match = make_match("mlb", sr_id=game.sr_id, status="inprogress")
    b, stale = ctx["coordination"], ctx["settings"].listener_heartbeat_stale_seconds
    env = {
        **subprocess_env,
        **lifecycle_env,
        "SPORTRADAR_BASE_URL": server.base_url,
        "LISTENER_MAX_CONSECUTIVE_HEARTBEATS": "100000",  # follows the idle feed until killed
    }
    kickoff = str(Path(sys.executable).parent / "kickoff")
    child = ChildProcess([kickoff, "listen", game.sr_id], env=env, log=tmp_path / "listen.log")
    try:
        [row] = wait_for(lambda: open_rows(match), timeout=60, what="the listen process's row")
        wait_for(lambda: b.locks.start_lock_holder(match.id) == str(row.id), what="its start lock")
        assert row.pid == child.pid and row.badge(stale_after_seconds=stale) is Badge.RUNNING
    finally:
        child.kill()  # SIGKILL: no shutdown write, no lock released
    assert child.proc.returncode == -signal.SIGKILL
    wait_for(
        lambda: reload_row(row).badge(stale_after_seconds=stale) is Badge.STALE,
        timeout=30,
        what="the killed run's row goes stale",
    )
    assert reload_row(row).ended_at is None and b.barriers.is_pending(match.id)  # orphaned until abandoned
    result = sweep_stale_match_listeners(settings=ctx["settings"], coordination=b)
    assert result.abandoned == 1 and result.barriers_cleared == [str(match.id)]
    [row] = rows_of(match)
    assert row.exit_code == 14 and row.stopped_by is None
    assert row.badge(stale_after_seconds=stale) is Badge.ABANDONED
    assert not b.barriers.is_pending(match.id) and not b.locks.start_lock(match.id).locked()
    assert b.barriers.attempts(match.id) == 0
    assert reload(match).auto_dispatch_listener is True
    assert _dispatch(ctx, outbox).enqueued == 1


def test_dispatch_itself_abandons_a_stale_row_and_re_enqueues(make_match, ctx, outbox):
    match = make_match(status="inprogress")
    dead_run(match, ctx["coordination"])
    result = _dispatch(ctx, outbox)
    assert result.abandoned == 1 and result.enqueued == 1
    assert rows_of(match)[0].exit_code == 14


@pytest.mark.parametrize("status", ["scheduled", "inprogress"])
def test_operator_stop_closes_with_15_clears_barriers_and_turns_auto_dispatch_off(
    make_match, ctx, outbox, runner, status
):
    match = make_match(status=status)
    _dispatch(ctx, outbox)
    future = run_message(ctx, runner, outbox.messages[0])
    wait_for(lambda: open_rows(match))
    ctx["coordination"].barriers.record_failed_attempt(match.id)
    res = stop_match_listener(str(match.id), settings=ctx["settings"], coordination=ctx["coordination"])
    # The run sees the stop flag at once and may close its own row (15, by the operator) before the
    # stop does: either way one row, closed as the stop says (below).
    assert res.rows_closed <= 1 and res.revoked_message_id == outbox.messages[0].message_id
    assert future.result(timeout=30).exit_code == 15
    [row] = rows_of(match)
    assert row.exit_code == 15 and row.stopped_by == "operator"
    b = ctx["coordination"]
    assert (
        not b.barriers.is_pending(match.id)
        and b.barriers.attempts(match.id) == 0
        and not b.locks.start_lock(match.id).locked()
    )
    assert reload(match).auto_dispatch_listener is False
    assert reload(match).status == status  # a stop ends the listener only, never the match
    assert _dispatch(ctx, outbox).eligible == 0


def test_dispatch_off_excludes_the_match_until_re_enabled(make_match, ctx, outbox):
    from lifecycle.cleanup import set_auto_dispatch

    match = make_match(auto_dispatch_listener=False)
    assert _dispatch(ctx, outbox).eligible == 0
    set_auto_dispatch(str(match.id), True, coordination=ctx["coordination"])
    assert _dispatch(ctx, outbox).enqueued == 1


def test_every_enqueue_gets_a_unique_dot_separated_message_id(make_match):
    match_id = str(uuid.uuid4())
    ids = {new_message_id(match_id) for _ in range(100)}
    assert len(ids) == 100
    for mid in ids:
        prefix, internal, enqueue = mid.split(".")
        assert prefix == "start-match-listener" and internal == match_id
        assert re.fullmatch(r"[0-9a-f-]{36}", enqueue)
