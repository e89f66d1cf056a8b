"""Every row of "Stop vs force vs abandon", and stops of starts that are still queued."""

from __future__ import annotations

import pytest

from lifecycle.cleanup import stop_match_listener, sweep_stale_match_listeners
from tests.lifecycle.helpers import dead_run, dispatch, open_rows, reload, rows_of, start
from tests.waiting import wait_for


def _barriers_clear(b, match) -> bool:
    return not (
        b.barriers.is_pending(match.id)
        or b.barriers.attempts(match.id)
        or b.barriers.is_exhausted(match.id)
        or b.locks.start_lock(match.id).locked()
    )


def _dirty(b, match) -> None:
    b.barriers.claim_pending(match.id)
    b.barriers.record_failed_attempt(match.id)


def _dead_dirty_run(make_match, b):
    """A match whose run died with its row open, leaving a pending key and a failed attempt."""
    match = make_match()
    dead_run(match, b)
    _dirty(b, match)
    return match


def _assert_ended_clean(match, b, *, exit_code: int, auto_dispatch: bool) -> None:
    assert rows_of(match)[0].exit_code == exit_code
    assert _barriers_clear(b, match)
    assert reload(match).auto_dispatch_listener is auto_dispatch


def test_abandoned_14_clears_barriers_and_auto_dispatch_stays_on(make_match, ctx):
    b = ctx["coordination"]
    match = _dead_dirty_run(make_match, b)
    sweep_stale_match_listeners(settings=ctx["settings"], coordination=b)
    _assert_ended_clean(match, b, exit_code=14, auto_dispatch=True)


def test_abandon_keeps_barriers_while_an_active_sibling_remains(make_match, ctx, runner):
    match = make_match()
    b = ctx["coordination"]
    future = runner(start, match, **ctx)
    wait_for(lambda: open_rows(match))
    from datetime import timedelta

    from config.clock import utcnow
    from models.listener_record import MatchListenerRecord

    past = utcnow() - timedelta(hours=1)
    MatchListenerRecord.create(match=match.id, created_at=past, heartbeat_at=past)
    result = sweep_stale_match_listeners(settings=ctx["settings"], coordination=b)
    assert result.abandoned == 1 and result.barriers_cleared == []
    assert b.locks.start_lock(match.id).locked()  # the live run's lock is untouched
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=b)
    future.result(timeout=5)


def test_operator_stop_15_clears_barriers_and_turns_auto_dispatch_off(make_match, ctx):
    b = ctx["coordination"]
    match = _dead_dirty_run(make_match, b)
    result = stop_match_listener(str(match.id), settings=ctx["settings"], coordination=b)
    assert result.rows_closed == 1 and result.locks_released == 1
    _assert_ended_clean(match, b, exit_code=15, auto_dispatch=False)


def test_manual_force_start_clears_barriers_then_reacquires_and_leaves_auto_dispatch(make_match, ctx, runner):
    match = make_match()
    b = ctx["coordination"]
    _dirty(b, match)
    future = runner(start, match, force=True, **ctx)
    [row] = wait_for(lambda: open_rows(match))
    assert b.barriers.attempts(match.id) == 0
    assert b.client.get(b.start_lock_key(match.id)).decode() == str(row.id)
    assert reload(match).auto_dispatch_listener is True
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=b)
    future.result(timeout=5)


def test_a_stop_while_the_start_is_queued_prevents_the_start(make_match, ctx, outbox):
    match = make_match()
    dispatch(settings=ctx["settings"], coordination=ctx["coordination"], send=outbox)
    [message] = outbox.messages
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=ctx["coordination"])
    result = start(match, message_id=message.message_id, **ctx)
    assert result.as_dict()["skipped_revoked"] is True
    assert rows_of(match) == []


def test_a_start_with_no_message_id_is_skipped_while_the_stop_flag_is_set(make_match, ctx, runner):
    match = make_match()
    ctx["coordination"].stops.set_stop_flag(
        match.id
    )  # the stop happened; this start has no message id to revoke
    result = start(match, **ctx)
    assert result.as_dict()["skipped_stopped"] is True and rows_of(match) == []


def test_a_start_skipped_by_a_stop_that_raced_its_dispatch_clears_the_pending_key(make_match, ctx, outbox):
    """A stop between the dispatch's pending key and its start: the skip frees the key, so a
    plain Start is enqueued again at once (develop has no scheduled sweep)."""
    from lifecycle.dispatch import request_start

    match = make_match()
    b = ctx["coordination"]
    b.stops.set_stop_flag(match.id)  # the stop's flag is set ...
    assert b.barriers.claim_pending(match.id)  # ... and the racing dispatch's key taken after its clear
    result = start(match, **ctx)
    assert result.as_dict()["skipped_stopped"] is True and rows_of(match) == []
    assert not b.barriers.is_pending(match.id)
    message, _ = request_start(str(match.id), overrides=None, force=False, coordination=b, send=outbox)
    assert message is not None and outbox.messages == [message]


def test_a_stopped_match_is_not_re_dispatched_until_dispatch_is_turned_back_on(make_match, ctx, outbox):
    from lifecycle.cleanup import set_auto_dispatch

    match = make_match()
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=ctx["coordination"])
    assert dispatch(settings=ctx["settings"], coordination=ctx["coordination"], send=outbox).eligible == 0
    set_auto_dispatch(str(match.id), True, coordination=ctx["coordination"])
    assert not ctx["coordination"].stops.stop_flags_among([match.id])
    assert dispatch(settings=ctx["settings"], coordination=ctx["coordination"], send=outbox).enqueued == 1


def test_a_stop_of_an_unknown_match_raises_match_not_found(ctx, db):
    import uuid

    from models.errors import MatchNotFound

    with pytest.raises(MatchNotFound):
        stop_match_listener(str(uuid.uuid4()), settings=ctx["settings"], coordination=ctx["coordination"])


def test_an_older_queued_start_never_runs_after_a_stop_even_once_the_stop_flag_expired(
    make_match, ctx, outbox
):
    from lifecycle.dispatch import request_start

    match = make_match(listener_start_settings={"listener_test_duration_seconds": 0})
    b = ctx["coordination"]
    dispatch(settings=ctx["settings"], coordination=b, send=outbox)  # M1: queued behind a full worker
    [older] = outbox.messages
    request_start(str(match.id), overrides=None, force=True, coordination=b, send=outbox)  # M2 (stored)
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=b)  # revokes M2 only
    b.stops.clear_stop_flag(match.id)  # the stop flag's TTL ran out
    result = start(match, message_id=older.message_id, **ctx)
    assert result.as_dict()["skipped_superseded"] is True and rows_of(match) == []
    assert reload(match).auto_dispatch_listener is False
