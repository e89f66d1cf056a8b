"""A heartbeat stuck or failing on PostgreSQL or Redis never lets a listener outlive its start lock."""

from __future__ import annotations

import time

import peewee
import psycopg2
import pytest
import redis

from lifecycle.heartbeat import HeartbeatRegistration, HeartbeatService
from lifecycle.listener_run import run_match_listener
from lifecycle.sql import rows
from lifecycle.stop_watch import StopWatcher
from models.coordination import CoordinationStore
from tests.lifecycle.helpers import live_row, open_rows, rows_of, start
from tests.waiting import wait_for


def _row_locker(database_url: str, record_id: str) -> psycopg2.extensions.connection:
    """Another session holding the row's lock: every UPDATE of that row blocks until rollback."""
    conn = psycopg2.connect(database_url)
    cur = conn.cursor()
    cur.execute("SELECT id FROM match_listener_records WHERE id = %s FOR UPDATE", (record_id,))
    return conn


def test_a_heartbeat_stuck_in_postgresql_still_stops_the_listener_before_its_lock_expires(
    make_match, ctx, runner
):
    match = make_match()
    future = runner(start, match, **ctx)
    [row] = wait_for(lambda: open_rows(match))
    record_id = str(row.id)
    services, coordination = ctx["services"], ctx["coordination"]
    [handle] = wait_for(services.running)
    blocker = _row_locker(ctx["settings"].database_url, record_id)
    try:
        wait_for(lambda: handle.cause is not None, timeout=5)
        # Told to stop while its lock still holds its token: no successor could have started yet.
        assert coordination.locks.start_lock_holder(match.id) == record_id
        assert handle.cause.code == 16
    finally:
        blocker.rollback()
        blocker.close()
    result = future.result(timeout=5)
    assert result.exit_code == 16 and rows_of(match)[0].exit_code == 16


def test_the_lease_fence_stops_a_run_while_every_redis_call_of_its_worker_hangs(
    make_match, ctx, runner, monkeypatch
):
    """A black-holed Redis: the stop-flag poll, the lock extension and the lease renewal all hang."""
    import threading

    from config.errors import RedisUnavailable
    from lifecycle.heartbeat import LOCK_UNREACHABLE
    from lifecycle.lease import LEASE_EXPIRED

    match = make_match()
    future = runner(start, match, **ctx)
    wait_for(lambda: open_rows(match))
    [handle] = wait_for(ctx["services"].running)
    coordination, released = ctx["coordination"], threading.Event()

    def hang(*args, **kwargs):
        released.wait(60)
        raise RedisUnavailable(service="Redis", setting="REDIS_URL", address="x", reason="timeout")

    monkeypatch.setattr(coordination.stops, "stop_flags_among", hang)
    monkeypatch.setattr(coordination.locks, "extend_start_locks", hang)
    monkeypatch.setattr(coordination.locks, "renew_worker_lease", hang)
    try:
        lease = ctx["settings"].listener_worker_lease_seconds
        wait_for(lambda: handle.cause is not None, timeout=lease + 5, what="the run fenced")
        # Stopped by the deadline thread (the heartbeat and stop-watch threads hang): its lock
        # (1.5 s here) or its lease, whichever deadline comes first.
        assert handle.cause.code == 16 and handle.cause.reason in (LEASE_EXPIRED, LOCK_UNREACHABLE)
    finally:
        released.set()
    monkeypatch.undo()
    assert future.result(timeout=30).exit_code == 16


def test_a_row_write_that_keeps_failing_does_not_stop_the_lock_from_being_extended(
    make_match, lcoordination, monkeypatch
):
    match = make_match()
    record = live_row(match)
    assert lcoordination.locks.start_lock(match.id).acquire(record)
    lcoordination.client.pexpire(lcoordination.start_lock_key(match.id), 1000)

    def broken(record_ids):
        raise peewee.InterfaceError("connection already closed")

    monkeypatch.setattr(rows, "heartbeat_rows", broken)
    lost: list[str] = []
    service = HeartbeatService(
        coordination=lcoordination, interval_seconds=0.1, lock_ttl_seconds=1.5, grace_seconds=0.2
    )
    reg = HeartbeatRegistration(str(match.id), record, record, on_lost=lost.append)
    service.register(reg)
    report = service.beat_once()
    service.stop()
    assert report.locks_extended == 1 and report.rows_written == 0 and lost == []
    assert lcoordination.client.pttl(lcoordination.start_lock_key(match.id)) > 1200
    reg.last_row_ok -= 10  # the row has not been written for longer than the margin
    service.beat_once()
    assert lost and "heartbeat could not be written" in lost[0]


@pytest.mark.parametrize("which", ["lock", "row"], ids=["lock deadline", "row deadline"])
def test_the_stop_watch_tick_enforces_the_heartbeat_deadlines_of_every_run(make_match, lcoordination, which):
    match = make_match()
    record = live_row(match)
    lost: list[str] = []
    service = HeartbeatService(
        coordination=lcoordination, interval_seconds=0.1, lock_ttl_seconds=1.5, grace_seconds=0.2
    )
    reg = HeartbeatRegistration(str(match.id), record, record, on_lost=lost.append)
    service.register(reg)
    service.stop()  # no beats: only the other thread's check can stop the run
    assert service.enforce_deadlines() == [] and lost == []
    if which == "lock":
        reg.last_lock_ok -= 10
    else:
        reg.last_row_ok -= 10
    assert service.enforce_deadlines() == [str(match.id)]
    assert len(lost) == 1


def test_the_stop_watch_tick_runs_even_when_the_poll_fails_with_a_redis_error(lcoordination):
    broken = CoordinationStore(
        redis.Redis(db=99),  # SELECT 99 answers an error that is not a connection error
        prefix=lcoordination.prefix,
        url="redis://127.0.0.1:6379/99",
    )
    ticks: list[int] = []
    from lifecycle.stop_watch import StopRegistration

    watcher = StopWatcher(stops=broken.stops, poll_seconds=10, tick=lambda: ticks.append(1))
    watcher.register(StopRegistration("m", on_stop=lambda: None))
    watcher.stop()
    watcher.step()
    assert ticks == [1]


def test_the_lock_deadline_counts_from_when_the_lock_was_taken_not_from_registration(make_match, ctx):
    match = make_match()
    token = "0" * 8 + "-0000-4000-8000-" + "0" * 12
    coordination = ctx["coordination"]
    assert coordination.locks.start_lock(match.id).acquire(token)
    begun = time.monotonic()
    # The lock was taken long ago (a slow start): the run must be stopped at once.
    outcome = run_match_listener(
        str(match.id),
        None,
        token=token,
        message_id=None,
        services=ctx["services"],
        lock_acquired_at=begun - 10,
    )
    assert outcome.exit_code == 16
    assert time.monotonic() - begun < 3
