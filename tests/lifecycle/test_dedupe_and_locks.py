"""Every row of "Deduping and locks", the race of 8 dispatchers, and re-delivered starts."""

from __future__ import annotations

import time

import pytest

from lifecycle.cleanup import stop_match_listener, sweep_stale_match_listeners
from lifecycle.dispatch import request_start
from tests.lifecycle.helpers import dead_run, dispatch, live_row, open_rows, reload, rows_of, start
from tests.racing import race
from tests.waiting import wait_for


def test_a_fresh_open_row_skips_the_start(make_match, ctx):
    match = make_match()
    live_row(match)
    assert start(match, **ctx).as_dict()["skipped_active"] is True
    assert len(rows_of(match)) == 1


def test_a_stale_open_row_is_abandoned_with_14_and_allows_the_restart(make_match, ctx):
    match = make_match(listener_start_settings={"listener_test_duration_seconds": 0})
    dead_run(match, ctx["coordination"])
    result = start(match, **ctx)
    assert result.exit_code == 0
    old, new = rows_of(match)
    assert old.exit_code == 14 and new.exit_code == 0


def test_the_pending_key_stops_dispatch_and_manual_start_double_enqueueing(make_match, ctx, outbox):
    match = make_match()
    b = ctx["coordination"]
    assert dispatch(send=outbox, **_sb(ctx)).enqueued == 1
    assert dispatch(send=outbox, **_sb(ctx)).skipped == 1
    message, note = request_start(str(match.id), overrides=None, force=False, coordination=b, send=outbox)
    assert message is None and "already queued" in note
    assert len(outbox.messages) == 1


def test_the_attempt_counter_counts_failed_starts_with_a_ttl(make_match, ctx):
    match = make_match(listener_start_settings={"listener_force_exit_code": 11})
    start(match, **ctx)
    start(match, **ctx)
    b = ctx["coordination"]
    assert b.barriers.attempts(match.id) == 2
    ttl = b.client.ttl(b.attempts_key(match.id))
    assert 0 < ttl <= ctx["settings"].listener_start_attempts_ttl_seconds


def test_the_exhausted_flag_makes_dispatch_skip_the_match(make_match, ctx, outbox):
    match = make_match()
    b = ctx["coordination"]
    for _ in range(b.attempt_cap):
        b.barriers.record_failed_attempt(match.id)
    result = dispatch(send=outbox, **_sb(ctx))
    assert result.exhausted == 1 and result.enqueued == 0


def test_the_dispatch_lock_allows_one_dispatch_at_a_time(make_match, ctx, outbox):
    make_match()
    held = ctx["coordination"].locks.dispatch_lock()
    assert held.acquire()
    assert dispatch(send=outbox, **_sb(ctx)).locked is True
    held.release()
    assert dispatch(send=outbox, **_sb(ctx)).enqueued == 1


def test_the_sweep_lock_allows_one_sweeper_and_the_threshold_is_optional(make_match, ctx):
    match = make_match()
    live_row(match)  # fresh heartbeat
    held = ctx["coordination"].locks.sweep_lock()
    assert held.acquire()
    assert (
        sweep_stale_match_listeners(settings=ctx["settings"], coordination=ctx["coordination"]).locked is True
    )
    held.release()
    assert (
        sweep_stale_match_listeners(settings=ctx["settings"], coordination=ctx["coordination"]).abandoned == 0
    )
    forced = sweep_stale_match_listeners(
        heartbeat_stale_seconds=0, settings=ctx["settings"], coordination=ctx["coordination"]
    )
    assert forced.abandoned == 1 and rows_of(match)[0].exit_code == 14


def test_the_start_lock_holds_one_starter_per_match_and_is_extended_by_heartbeats(make_match, ctx, runner):
    match = make_match()
    b = ctx["coordination"]
    future = runner(start, match, **ctx)
    [row] = wait_for(lambda: open_rows(match))
    key = b.start_lock_key(match.id)
    assert b.client.get(key).decode() == str(row.id)  # the lock's token is the row id
    assert start(match, force=True, **ctx).as_dict()["skipped_locked"] is True
    ttl_ms = ctx["settings"].listener_heartbeat_stale_seconds * 1000
    # Outlive the lock's TTL: only heartbeats can keep it.
    time.sleep(ctx["settings"].listener_heartbeat_stale_seconds * 1.5)
    assert b.client.get(key).decode() == str(row.id)
    assert 0 < b.client.pttl(key) <= ttl_ms
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=b)
    future.result(timeout=5)
    assert b.client.get(key) is None


@pytest.mark.parametrize("use_lock", [True, False], ids=["with-dispatch-lock", "pending-keys-alone"])
def test_eight_concurrent_dispatchers_over_200_matches_send_exactly_200_starts(
    make_match, ctx, outbox, use_lock
):
    matches = [make_match() for _ in range(200)]

    def one(go):
        go()
        return dispatch(send=outbox, use_lock=use_lock, **_sb(ctx))

    results, errors = race(one, callers=8)
    assert errors == [] and len(results) == 8
    assert len(outbox.messages) == 200
    assert sorted(outbox.match_ids) == sorted(str(m.id) for m in matches)
    assert sum(r.enqueued for r in results) == 200


def test_a_redelivered_start_message_does_nothing(make_match, ctx, outbox, runner):
    match = make_match(listener_start_settings={"listener_test_duration_seconds": 0})
    dispatch(send=outbox, **_sb(ctx))
    [message] = outbox.messages
    first = start(match, message_id=message.message_id, **ctx)
    assert first.exit_code == 0
    again = start(match, message_id=message.message_id, **ctx)
    assert again.as_dict()["skipped_revoked"] is True
    assert len(rows_of(match)) == 1


def test_a_redelivered_start_of_a_run_that_died_before_its_row_frees_the_pending_key(make_match, ctx, outbox):
    match = make_match()
    dispatch(send=outbox, **_sb(ctx))
    [message] = outbox.messages
    ctx["coordination"].barriers.consume_message(
        message.message_id
    )  # first delivery consumed it, then the worker died
    again = start(match, message_id=message.message_id, **ctx)
    assert again.as_dict()["skipped_revoked"] is True and rows_of(match) == []
    assert not ctx["coordination"].barriers.is_pending(match.id)
    assert dispatch(send=outbox, **_sb(ctx)).enqueued == 1


def test_a_redelivered_start_whose_worker_died_before_its_run_sends_the_match_again_at_once(
    make_match, ctx, outbox
):
    """A worker killed after it took a start and before its run began: a reaper requeues that start
    (actors.fetched_starts), and its re-delivery sends the match again at once instead of leaving it to
    the next dispatch tick; while a run holds the match, a re-delivery sends nothing."""
    match = make_match()
    dispatch(send=outbox, **_sb(ctx))
    [message] = outbox.messages
    ctx["coordination"].barriers.consume_message(message.message_id)  # taken, then its worker died
    sent: list[list[str]] = []
    ctx["services"].redispatch = sent.append
    lock = ctx["coordination"].locks.start_lock(match.id)
    lock.acquire(token="a-live-run")
    held = start(match, message_id=message.message_id, **ctx)
    assert held.as_dict()["skipped_revoked"] is True and sent == []
    lock.release()
    again = start(match, message_id=message.message_id, **ctx)
    assert again.as_dict()["skipped_revoked"] is True and rows_of(match) == []
    assert sent == [[str(match.id)]]


def test_a_start_lock_whose_worker_died_before_the_row_is_released_by_a_reaper_and_a_run_forgets_its_note(
    make_match, ctx, runner
):
    """A start takes its match's lock, then its run writes the row: a worker killed in between leaves a
    lock no row names, which only its TTL (the stale threshold) would end. The start notes the lock
    under its worker's lease, and a reaper that finds the lease dead releases it; a run that began
    forgets the note once it lets the lock go."""
    from lifecycle import cleanup, guarded_start

    coordination = ctx["coordination"]
    match = make_match(listener_start_settings={"listener_test_duration_seconds": 1.0})
    assert coordination.barriers.claim_pending(match.id)
    taken = guarded_start._take_start_lock(
        str(match.id), False, settings=ctx["settings"], coordination=coordination, lease_id="killed"
    )
    assert isinstance(taken, guarded_start.HeldLock)  # then its worker was killed: no row, no unwind
    assert rows_of(match) == [] and coordination.locks.start_lock_holder(match.id) == taken.token
    assert cleanup.release_starts_of_dead(["killed"], coordination=coordination) == [str(match.id)]
    assert coordination.locks.start_lock_holder(match.id) is None
    assert not coordination.barriers.is_pending(match.id)

    lease = ctx["services"].lease.renew().lease_id
    noted = coordination.locks.starts_taken_key(lease)
    future = runner(start, match, **ctx)
    wait_for(lambda: coordination.locks.client.hexists(noted, str(match.id)), what="the run's lock noted")
    assert future.result(timeout=60).exit_code == 0
    assert not coordination.locks.client.hexists(noted, str(match.id))


def test_a_reapers_full_step_finds_a_worker_killed_before_any_of_its_runs_wrote_a_row(make_match, ctx):
    """A worker killed right after a burst of starts, none of whose runs wrote a row yet, is named by
    no open row: the reapers judge every listener worker's lease too (each one that held its liveness
    signal), so its locks are released at once, not at their TTL (the stale threshold: 88-209 s
    without a stream in a chaos run that killed such a worker 0.5 s after a deploy sent it starts),
    and what it fetched goes back to the queue (the caller's ``dead_leases``)."""
    from lifecycle import cleanup, guarded_start

    coordination, settings = ctx["coordination"], ctx["settings"]
    match = make_match()
    coordination.locks.renew_worker_lease("killed", known_epoch="", new_epoch_id="e", ttl_seconds=60)
    signal = coordination.locks.liveness_subscription("killed")  # a worker that held its signal
    assert "killed" in coordination.locks.leases_to_judge()
    assert coordination.barriers.claim_pending(match.id)
    taken = guarded_start._take_start_lock(
        str(match.id), False, settings=settings, coordination=coordination, lease_id="killed"
    )
    assert isinstance(taken, guarded_start.HeldLock) and rows_of(match) == []
    signal.close()  # its process ended: no connection holds its liveness signal, no row names its lease

    def judged_dead() -> bool:
        dead: list[str] = []
        seen: list[str] = []
        cleanup.reap_dead_workers(
            settings=settings, coordination=coordination, dead_leases=dead, leases_seen=seen
        )
        assert "killed" in seen  # watched between full steps too
        return "killed" in dead

    wait_for(judged_dead, timeout=30, what="the lease judged dead by a full step")
    assert cleanup.release_starts_of_dead(["killed"], coordination=coordination) == [str(match.id)]
    assert coordination.locks.start_lock_holder(match.id) is None
    assert not coordination.barriers.is_pending(match.id)
    assert "killed" not in coordination.locks.leases_to_judge()


def test_a_start_superseded_by_a_newer_message_does_nothing(make_match, ctx, outbox):
    match = make_match()
    dispatch(send=outbox, **_sb(ctx))
    old = outbox.messages[0]
    request_start(str(match.id), overrides=None, force=True, coordination=ctx["coordination"], send=outbox)
    assert start(match, message_id=old.message_id, **ctx).as_dict()["skipped_superseded"] is True
    assert rows_of(match) == []


def _sb(ctx):
    return {"settings": ctx["settings"], "coordination": ctx["coordination"]}


def _age_rows(match, *, hours: float) -> None:
    """Backdate the creation of the match's rows (a run started ``hours`` ago; heartbeats untouched)."""
    from datetime import timedelta

    from config.clock import utcnow
    from models.listener_record import MatchListenerRecord

    MatchListenerRecord.update(created_at=utcnow() - timedelta(hours=hours)).where(
        MatchListenerRecord.match == match.id
    ).execute()


def test_a_run_older_than_the_active_age_that_holds_its_lock_gets_no_start_and_keeps_its_message_id(
    make_match, ctx, outbox, runner
):
    match = make_match(status="inprogress")
    b = ctx["coordination"]
    assert dispatch(send=outbox, **_sb(ctx)).enqueued == 1
    [message] = outbox.messages
    future = runner(start, match, message_id=message.message_id, **ctx)
    [row] = wait_for(lambda: open_rows(match))
    _age_rows(match, hours=13)  # older than LISTENER_ACTIVE_MAX_AGE_SECONDS (12 h), still beating
    b.barriers.clear_pending(match.id)  # its pending key expired after the active age
    for _ in range(3):  # one tick a minute
        result = dispatch(send=outbox, **_sb(ctx))
        assert result.eligible == 0 and result.enqueued == 0
    assert len(outbox.messages) == 1
    assert reload(match).start_message_id == message.message_id
    assert b.locks.start_lock_holder(match.id) == str(row.id)
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=b)
    future.result(timeout=10)


def test_an_old_beating_row_that_holds_no_lock_is_still_dispatched_by_its_age(make_match, ctx, outbox):
    from tests.lifecycle.helpers import beating_row

    match = make_match(status="inprogress")
    with beating_row(match):
        _age_rows(match, hours=13)
        assert ctx["coordination"].locks.start_lock_holder(match.id) is None
        assert dispatch(send=outbox, **_sb(ctx)).enqueued == 1
