"""Exit codes → start outcome, row by row ("Exit codes" table), plus settings errors and skips."""

from __future__ import annotations

import pytest

from lifecycle.board import listener_board
from lifecycle.cleanup import stop_match_listener, sweep_stale_match_listeners
from lifecycle.errors import ListenerStartSettingsError
from models.badges import ENDED_BY_THE_RUN, Badge
from models.listener_record import MatchListenerRecord
from tests.lifecycle.helpers import dead_run, dispatch, open_rows, quick, rows_of, start
from tests.waiting import wait_for

SUCCESS = [(0, "clean"), (10, "max heartbeats"), (13, "not in progress")]
FAILURE = [
    (16, "cancelled"),
    (9, "unexpected error"),
    (11, "data error"),
    (12, "connection error"),
    (42, "unexpected exit 42"),
]


@pytest.mark.parametrize(
    ("code", "reason"), SUCCESS, ids=["0-clean", "10-max-heartbeats", "13-not-in-progress"]
)
def test_a_success_exit_ends_the_row_and_counts_no_attempt(make_match, ctx, code, reason):
    match = make_match(listener_start_settings={"listener_force_exit_code": code})
    result = start(match, **ctx)
    assert result.success and result.exit_code == code
    [row] = rows_of(match)
    assert row.exit_code == code and row.exit_reason == reason and row.ended_at is not None
    assert row.badge(stale_after_seconds=60) is Badge.ENDED
    assert ctx["coordination"].barriers.attempts(match.id) == 0


@pytest.mark.parametrize(
    ("body", "code", "reason", "success"),
    [
        ("ReturnsNone", 0, "clean", True),
        ("ExitsNone", 0, "clean", True),
        ("ExitsThree", 3, "unexpected exit 3", False),
        ("ExitsWithMessage", 1, "unexpected exit 1: SystemExit(feed gone)", False),
    ],
    ids=["return-None", "SystemExit(None)", "SystemExit(3)", "SystemExit(msg)"],
)
def test_a_body_returning_none_or_raising_system_exit_closes_its_row_with_the_spec_outcome(
    make_match, ctx, body, code, reason, success, monkeypatch
):
    """0 / None is a SUCCESS; SystemExit(n) is exit n and SystemExit("msg") exit 1, both counted."""
    monkeypatch.setenv("LISTENER_BODY", f"tests.lifecycle.bodies:{body}")  # the worker's environment
    match = make_match()
    result = start(match, **ctx)
    assert result.success is success and result.exit_code == code
    [row] = rows_of(match)
    assert row.ended_at is not None and row.exit_code == code and row.exit_reason == reason
    assert ctx["coordination"].barriers.attempts(match.id) == (0 if success else 1)
    assert not ctx["coordination"].locks.start_lock(match.id).locked()


@pytest.mark.parametrize(
    ("code", "reason"),
    FAILURE,
    ids=["16-cancel", "9-exception", "11-data", "12-connection", "other-non-zero"],
)
def test_a_failure_exit_ends_the_row_and_counts_one_failed_attempt(make_match, ctx, code, reason):
    match = make_match(listener_start_settings={"listener_force_exit_code": code})
    result = start(match, **ctx)
    assert not result.success and result.exit_code == code and result.attempts == 1
    [row] = rows_of(match)
    assert row.exit_code == code and row.exit_reason == reason
    assert row.badge(stale_after_seconds=60) is Badge.ENDED
    assert ctx["coordination"].barriers.attempts(match.id) == 1
    assert not ctx["coordination"].barriers.is_pending(match.id)


def test_an_exception_in_the_body_is_exit_9(make_match, ctx, monkeypatch):
    monkeypatch.setenv("LISTENER_BODY", "tests.lifecycle.bodies:Exploding")  # the worker's environment
    match = make_match()
    result = start(match, **ctx)
    assert result.exit_code == 9 and not result.success


def _cleanup(how: str, match, ctx) -> None:
    """One of the three places the spec lets write 14: the sweep, dispatch, a start's own check."""
    if how == "sweep":
        sweep_stale_match_listeners(settings=ctx["settings"], coordination=ctx["coordination"])
    elif how == "dispatch":
        dispatch(settings=ctx["settings"], coordination=ctx["coordination"], send=lambda message: None)
    else:
        start(match, **ctx)


@pytest.mark.parametrize("how", ["sweep", "dispatch", "start"])
def test_exit_14_is_recorded_by_cleanup_not_by_a_live_run_and_is_not_counted(make_match, ctx, runner, how):
    """Recorded by cleanup: a stale open row is closed 14 (Abandoned) by the sweep, by dispatch and
    by a start's own check, uncounted. Not by a live run: the same cleanup beside a running
    listener writes nothing on its row, and a run that reports 14 itself is a counted failure."""
    b = ctx["coordination"]
    dead = make_match(status="inprogress", listener_start_settings=quick())
    record_id = dead_run(dead, b, hold_lock=(how != "start"))
    if how == "start":
        b.barriers.clear_pending(dead.id)  # a start's own check: its pending key is the new start's to claim
    _cleanup(how, dead, ctx)
    stale = next(r for r in rows_of(dead) if str(r.id) == record_id)
    assert stale.exit_code == 14 and stale.exit_reason == "heartbeat stale" and stale.stopped_by is None
    assert stale.badge(stale_after_seconds=60) is Badge.ABANDONED
    assert b.barriers.attempts(dead.id) == 0

    live = make_match(status="inprogress")
    future = runner(start, live, **ctx)
    [row] = wait_for(lambda: open_rows(live))
    wait_for(lambda: b.locks.start_lock_holder(live.id) == str(row.id))
    _cleanup(how, live, ctx)
    assert [r.id for r in open_rows(live)] == [row.id]  # a live run's row is never closed 14
    assert MatchListenerRecord.get_by_id(row.id).exit_code is None and not future.done()
    stop_match_listener(str(live.id), settings=ctx["settings"], coordination=b)
    assert future.result(timeout=10).exit_code == 15

    # A run that reports 14 itself is no cleanup: a failed start, counted.
    own = make_match(listener_start_settings={"listener_force_exit_code": 14})
    result = start(own, **ctx)
    assert not result.success and result.attempts == 1 and b.barriers.attempts(own.id) == 1


@pytest.mark.parametrize(
    ("how", "code"),
    [
        ("force", 14),
        ("force", 15),
        ("tests.lifecycle.bodies:ReturnsFourteen", 14),
        ("tests.lifecycle.bodies:ExitsFifteen", 15),
    ],
    ids=["forced-14", "forced-15", "body-returns-14", "body-exits-15"],
)
def test_a_run_that_exits_14_or_15_by_itself_is_a_counted_failed_start(
    make_match, ctx, how, code, monkeypatch
):
    """Only the cleanup's and the stop's own writes of 14 / 15 are uncounted; a run's own is a failure,
    and its badge says what happened: Ended (no cleanup abandoned it, no operator stopped it)."""
    if how == "force":
        match = make_match(listener_start_settings={"listener_force_exit_code": code})
    else:
        monkeypatch.setenv("LISTENER_BODY", how)
        match = make_match()
    result = start(match, **ctx)
    assert result.exit_code == code and not result.success and result.attempts == 1
    assert ctx["coordination"].barriers.attempts(match.id) == 1
    assert not ctx["coordination"].barriers.is_pending(match.id)
    [row] = rows_of(match)
    assert row.exit_code == code and row.stopped_by == ENDED_BY_THE_RUN
    assert row.badge(stale_after_seconds=60) is Badge.ENDED
    [entry] = listener_board(
        settings=ctx["settings"], coordination=ctx["coordination"], match_id=str(match.id)
    )
    assert entry.badge == Badge.ENDED.value and entry.exit_code == code


def test_a_run_exiting_14_by_itself_stops_being_dispatched_at_the_attempt_cap(make_match, ctx):
    match = make_match(listener_start_settings={"listener_force_exit_code": 14})
    b = ctx["coordination"]
    for _ in range(b.attempt_cap):
        start(match, **ctx)
    assert b.barriers.is_exhausted(match.id)
    assert start(match, **ctx).skipped == "skipped_exhausted"


def test_exit_15_is_recorded_by_the_stop_and_is_not_counted(make_match, ctx, runner):
    from tests.lifecycle.helpers import open_rows
    from tests.waiting import wait_for

    match = make_match()
    future = runner(start, match, **ctx)
    wait_for(lambda: open_rows(match))
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=ctx["coordination"])
    result = future.result(timeout=5)
    assert result.exit_code == 15 and result.success
    [row] = rows_of(match)
    assert row.exit_code == 15 and row.stopped_by == "operator"
    assert row.badge(stale_after_seconds=60) is Badge.STOPPED
    assert ctx["coordination"].barriers.attempts(match.id) == 0


@pytest.mark.parametrize(
    "where", ["overrides", "listener_start_settings"], ids=["unknown-override", "unknown-stored-setting"]
)
def test_a_settings_error_is_a_failed_start_counted_without_a_row(make_match, ctx, where):
    stored = {"no_such_setting": 1} if where == "listener_start_settings" else {}
    match = make_match(listener_start_settings=stored)
    overrides = {"no_such_setting": 1} if where == "overrides" else None
    ctx["coordination"].barriers.claim_pending(match.id)
    with pytest.raises(ListenerStartSettingsError, match="no_such_setting"):
        start(match, overrides=overrides, **ctx)
    assert rows_of(match) == []
    assert ctx["coordination"].barriers.attempts(match.id) == 1
    assert not ctx["coordination"].barriers.is_pending(match.id)
    assert not ctx["coordination"].locks.start_lock(match.id).locked()


def test_an_intentional_skip_is_a_successful_result_with_a_skipped_flag(make_match, ctx):
    from tests.lifecycle.helpers import live_row

    match = make_match()
    live_row(match)
    result = start(match, **ctx)
    assert result.success and result.as_dict()["skipped_active"] is True
