"""Every row of the "Case catalog" (lifecycle cases), run in-process against PostgreSQL and Redis."""

from __future__ import annotations

import re
import uuid

import pytest

from lifecycle.cleanup import stop_match_listener, sweep_stale_match_listeners
from lifecycle.dispatch import new_message_id
from models.badges import Badge
from tests.lifecycle.helpers import dead_run, dispatch, live_row, open_rows, quick, reload, rows_of, start
from tests.waiting import wait_for


def _dispatch(ctx, outbox, **kw):
    return dispatch(settings=ctx["settings"], barriers=ctx["barriers"], send=outbox, **kw)


def run_message(ctx, runner, message):
    from lifecycle.start_match import start_match_listener

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
    assert ctx["barriers"].is_pending(match.id)
    assert ctx["barriers"].start_lock(match.id).locked()
    result = future.result(timeout=5)
    assert result.exit_code == 0
    assert rows_of(match)[0].badge(stale_after_seconds=60) is Badge.ENDED
    assert not ctx["barriers"].is_pending(match.id) and not ctx["barriers"].start_lock(match.id).locked()


def test_a_match_with_auto_dispatch_off_is_not_selected(make_match, ctx, outbox):
    make_match(auto_dispatch_listener=False)
    assert _dispatch(ctx, outbox).eligible == 0 and outbox.messages == []


def test_manual_force_start_clears_barriers_reacquires_them_and_keeps_auto_dispatch(make_match, ctx, runner):
    match = make_match(auto_dispatch_listener=False)
    b = ctx["barriers"]
    for _ in range(b.attempt_cap):
        b.record_failed_attempt(match.id)
    b.claim_pending(match.id)
    assert b.is_exhausted(match.id)
    b.set_stop_flag(match.id)
    future = runner(start, match, force=True, **ctx)
    wait_for(lambda: open_rows(match))
    assert not b.is_exhausted(match.id) and b.attempts(match.id) == 0
    assert not b.stop_flags_among([match.id])  # cleared ...
    assert b.start_lock(match.id).locked() and b.is_pending(match.id)  # ... then re-acquired
    assert reload(match).auto_dispatch_listener is False
    stop_match_listener(str(match.id), settings=ctx["settings"], barriers=b)
    future.result(timeout=5)
    assert not b.is_pending(match.id) and not b.start_lock(match.id).locked()


def test_manual_force_start_does_not_stop_or_double_a_live_listener(make_match, ctx, runner):
    match = make_match()
    first = runner(start, match, **ctx)
    [live] = wait_for(lambda: open_rows(match))
    result = start(match, force=True, **ctx)
    assert result.as_dict()["skipped_locked"] is True
    assert [r.id for r in open_rows(match)] == [live.id]
    assert not first.done()
    stop_match_listener(str(match.id), settings=ctx["settings"], barriers=ctx["barriers"])
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
    assert not ctx["barriers"].is_pending(match.id) and not ctx["barriers"].start_lock(match.id).locked()
    assert reload(match).auto_dispatch_listener is True
    match.apply_stream("closed")  # the game is over: no longer eligible
    assert _dispatch(ctx, outbox).eligible == 0


def test_rain_delay_keeps_the_listener_running_and_dispatch_does_not_double_it(
    make_match, ctx, outbox, runner
):
    match = make_match(status="inprogress")
    future = runner(start, match, **ctx)
    wait_for(lambda: open_rows(match))
    match.apply_stream("delayed")
    assert reload(match).status == "delayed"
    result = _dispatch(ctx, outbox)
    assert result.eligible == 0 and outbox.messages == []
    [row] = open_rows(match)
    assert row.badge(stale_after_seconds=60) is Badge.RUNNING
    stop_match_listener(str(match.id), settings=ctx["settings"], barriers=ctx["barriers"])
    future.result(timeout=5)


@pytest.mark.parametrize("code", [9, 11, 12, 77], ids=["exception-9", "data-11", "connection-12", "other"])
def test_a_failed_run_clears_pending_counts_an_attempt_and_dispatch_retries(
    make_match, ctx, outbox, runner, code
):
    match = make_match(listener_start_settings={"listener_force_exit_code": code})
    _dispatch(ctx, outbox)
    result = run_message(ctx, runner, outbox.messages[0]).result(timeout=5)
    assert not result.success and ctx["barriers"].attempts(match.id) == 1
    assert not ctx["barriers"].is_pending(match.id)
    assert reload(match).auto_dispatch_listener is True
    assert _dispatch(ctx, outbox).enqueued == 1


def test_unexpected_cancel_16_is_treated_like_other_failures(make_match, ctx, outbox, runner):
    """A real cancel that no operator asked for: the run loses its start lock (another holder's
    token), its heartbeat notices and cancels it; recorded 16, counted, barriers cleared."""
    match = make_match()
    b = ctx["barriers"]
    _dispatch(ctx, outbox)
    future = run_message(ctx, runner, outbox.messages[0])
    wait_for(lambda: open_rows(match))
    b.client.set(b.start_lock_key(match.id), "another-holder")  # the lock is no longer the run's
    result = future.result(timeout=30)
    assert result.exit_code == 16 and not result.success
    [row] = rows_of(match)
    assert row.exit_code == 16 and row.stopped_by is None
    assert row.badge(stale_after_seconds=60) is Badge.ENDED
    assert b.attempts(match.id) == 1
    assert b.start_lock_holder(match.id) == "another-holder"  # never deletes a lock it does not own


@pytest.mark.parametrize("guard", ["fresh-open-row", "start-lock-held"])
def test_start_is_skipped_when_a_listener_is_already_active(make_match, ctx, guard):
    match = make_match()
    if guard == "fresh-open-row":
        live_row(match)
    else:
        ctx["barriers"].start_lock(match.id).acquire("someone-else")
    b = ctx["barriers"]
    holder = b.start_lock_holder(match.id)
    before = len(rows_of(match))
    result = start(match, **ctx)
    assert result.skipped == ("skipped_active" if guard == "fresh-open-row" else "skipped_locked")
    assert result.success
    assert len(rows_of(match)) == before
    # The barriers: the active run's start lock is its own still, nothing counted or exhausted.
    assert b.start_lock_holder(match.id) == holder
    assert b.attempts(match.id) == 0 and not b.is_exhausted(match.id)


def test_start_exhausted_after_15_failures_dispatch_skips_until_force(make_match, ctx, outbox, runner):
    match = make_match(listener_start_settings={"listener_force_exit_code": 12})
    b = ctx["barriers"]
    for n in range(1, b.attempt_cap + 1):
        result = start(match, **ctx)
        assert result.attempts == n
    assert b.is_exhausted(match.id)
    assert _dispatch(ctx, outbox).exhausted == 1 and outbox.messages == []
    assert start(match, **ctx).as_dict()["skipped_exhausted"] is True
    forced = start(match, force=True, **ctx)
    assert forced.exit_code == 12 and b.attempts(match.id) == 1 and not b.is_exhausted(match.id)


def test_hard_kill_goes_stale_then_abandoned_clears_barriers_and_dispatch_restarts(make_match, ctx, outbox):
    match = make_match(status="inprogress")
    record_id = dead_run(match, ctx["barriers"])
    [row] = open_rows(match)
    assert row.badge(stale_after_seconds=ctx["settings"].listener_heartbeat_stale_seconds) is Badge.STALE
    result = sweep_stale_match_listeners(settings=ctx["settings"], barriers=ctx["barriers"])
    assert result.abandoned == 1 and result.barriers_cleared == [str(match.id)]
    [row] = rows_of(match)
    assert str(row.id) == record_id and row.exit_code == 14 and row.exit_reason == "heartbeat stale"
    assert not ctx["barriers"].is_pending(match.id) and not ctx["barriers"].start_lock(match.id).locked()
    assert reload(match).auto_dispatch_listener is True
    assert _dispatch(ctx, outbox).enqueued == 1


def test_dispatch_itself_abandons_a_stale_row_and_re_enqueues(make_match, ctx, outbox):
    match = make_match(status="inprogress")
    dead_run(match, ctx["barriers"])
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
    ctx["barriers"].record_failed_attempt(match.id)
    res = stop_match_listener(str(match.id), settings=ctx["settings"], barriers=ctx["barriers"])
    # The run sees the stop flag at once and may close its own row (15, by the operator) before the
    # stop does: either way one row, closed as the stop says (below).
    assert res.rows_closed <= 1 and res.revoked_message_id == outbox.messages[0].message_id
    assert future.result(timeout=30).exit_code == 15
    [row] = rows_of(match)
    assert row.exit_code == 15 and row.stopped_by == "operator"
    b = ctx["barriers"]
    assert not b.is_pending(match.id) and b.attempts(match.id) == 0 and not b.start_lock(match.id).locked()
    assert reload(match).auto_dispatch_listener is False
    assert reload(match).status == status  # a stop ends the listener only, never the match
    assert _dispatch(ctx, outbox).eligible == 0


def test_dispatch_off_excludes_the_match_until_re_enabled(make_match, ctx, outbox):
    from lifecycle.cleanup import set_auto_dispatch

    match = make_match(auto_dispatch_listener=False)
    assert _dispatch(ctx, outbox).eligible == 0
    set_auto_dispatch(str(match.id), True, barriers=ctx["barriers"])
    assert _dispatch(ctx, outbox).enqueued == 1


def test_every_enqueue_gets_a_unique_dot_separated_message_id(make_match):
    match_id = str(uuid.uuid4())
    ids = {new_message_id(match_id) for _ in range(100)}
    assert len(ids) == 100
    for mid in ids:
        prefix, internal, enqueue = mid.split(".")
        assert prefix == "start-match-listener" and internal == match_id
        assert re.fullmatch(r"[0-9a-f-]{36}", enqueue)
