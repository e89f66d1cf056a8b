"""One heartbeat thread and one stop watcher per process; listeners that lose their lock stop themselves."""

from __future__ import annotations

import time

import pytest

from lifecycle.heartbeat import HeartbeatRegistration, HeartbeatService
from lifecycle.stop_watch import StopRegistration, StopWatcher
from models.coordination import CoordinationStore, connect_redis
from tests.lifecycle.helpers import live_row, open_rows, rows_of, start
from tests.waiting import wait_for


def test_one_beat_writes_every_row_and_extends_every_lock_in_one_statement_each(make_match, lcoordination):
    matches = [make_match() for _ in range(50)]
    lost: list[str] = []
    service = HeartbeatService(
        coordination=lcoordination, interval_seconds=10, lock_ttl_seconds=5, grace_seconds=0
    )
    for m in matches:
        record = live_row(m)
        lcoordination.locks.start_lock(m.id).acquire(record)
        service.register(HeartbeatRegistration(str(m.id), record, record, on_lost=lost.append))
    report = service.beat_once()
    service.stop()
    assert report.rows_written == 50 and report.locks_extended == 50 and lost == []
    assert lcoordination.client.pttl(lcoordination.start_lock_key(matches[0].id)) > 4000


def test_a_beat_refuses_the_heartbeat_of_a_run_whose_match_has_a_newer_fencing_token(
    make_match, lcoordination
):
    import uuid

    from lifecycle.heartbeat import FENCED
    from lifecycle.sql import rows

    match = make_match()
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    for record in (old, new):  # the older run "paused"; its successor took the next token
        rows.create_row(record_id=record, match_id=str(match.id), message_id=None, dry_run=False)
    lost: list[tuple[str, str]] = []
    service = HeartbeatService(
        coordination=lcoordination, interval_seconds=10, lock_ttl_seconds=5, grace_seconds=0
    )
    lcoordination.locks.start_lock(match.id).acquire(old)  # its lock still holds: only the fence refuses it
    service.register(
        HeartbeatRegistration(str(match.id), old, old, on_lost=lambda reason: lost.append((old, reason)))
    )
    report = service.beat_once()
    service.stop()
    assert report.rows_written == 0 and lost == [(old, FENCED)]


def test_a_listener_whose_start_lock_was_taken_stops_itself_with_16(make_match, ctx, runner):
    match = make_match()
    future = runner(start, match, **ctx)
    wait_for(lambda: open_rows(match))
    b = ctx["coordination"]
    b.client.set(b.start_lock_key(match.id), "a-successor")
    result = future.result(timeout=3)
    assert result.exit_code == 16 and "start lock lost" in result.reason
    assert rows_of(match)[0].exit_code == 16
    assert b.client.get(b.start_lock_key(match.id)) == b"a-successor"  # never deletes what it does not own


def test_a_listener_whose_row_was_closed_elsewhere_stops_without_counting_a_failure(make_match, ctx, runner):
    from lifecycle.cleanup import sweep_stale_match_listeners

    match = make_match()
    future = runner(start, match, **ctx)
    wait_for(lambda: open_rows(match))
    sweep_stale_match_listeners(
        heartbeat_stale_seconds=0, settings=ctx["settings"], coordination=ctx["coordination"]
    )
    result = future.result(timeout=3)
    assert result.success and rows_of(match)[0].exit_code == 14
    assert ctx["coordination"].barriers.attempts(match.id) == 0
    assert not ctx["coordination"].locks.start_lock(match.id).locked()


def test_redis_unreachable_stops_the_listener_before_its_lock_could_expire(make_match, lcoordination):
    match = make_match()
    record = live_row(match)
    ttl = 2.0
    assert lcoordination.locks.start_lock(match.id).acquire(record)
    lcoordination.client.pexpire(lcoordination.start_lock_key(match.id), int(ttl * 1000))
    dead = CoordinationStore(
        connect_redis("redis://127.0.0.1:1/0"),
        prefix=lcoordination.prefix,
        url="redis://127.0.0.1:1/0",
        stale_seconds=ttl,
    )
    stopped_at: list[float] = []
    service = HeartbeatService(
        coordination=dead, interval_seconds=0.1, lock_ttl_seconds=ttl, grace_seconds=0.5
    )
    acquired = time.monotonic()
    service.register(
        HeartbeatRegistration(
            str(match.id), record, record, on_lost=lambda reason: stopped_at.append(time.monotonic())
        )
    )
    wait_for(lambda: stopped_at, timeout=3)
    service.stop()
    assert 0.5 < stopped_at[0] - acquired < ttl  # kept going while it could, stopped before expiry


def test_one_mget_per_poll_notifies_only_the_flagged_listeners(lcoordination, redis_client):
    calls: list[str] = []
    watcher = StopWatcher(stops=lcoordination.stops, poll_seconds=10)
    for mid in ("a", "b", "c"):
        watcher.register(StopRegistration(mid, on_stop=lambda mid=mid: calls.append(mid)))
    lcoordination.stops.set_stop_flag("b")
    assert watcher.poll_once() == {"b"}
    watcher.stop()
    assert set(calls) == {"b"}  # the stop pushed with the flag may have notified b a second time


def test_a_stop_flagged_before_a_run_registers_stops_it_at_its_registration_not_at_the_poll(lcoordination):
    """A stop pushed after a run's row opened and before it registered with the watcher found no run to
    stop (CI: the operator-stop push test timed out on a loaded box): the registration reads the flag."""
    import threading

    calls: list[tuple[str, str]] = []
    watcher = StopWatcher(stops=lcoordination.stops, poll_seconds=300)
    lcoordination.stops.set_stop_flag("flagged")  # pushed now, while nothing here listens
    try:
        for mid in ("flagged", "other"):
            watcher.register(
                StopRegistration(
                    mid, on_stop=lambda mid=mid: calls.append((mid, threading.current_thread().name))
                )
            )
        # The registering thread stopped it (the push thread's poll once subscribed may do it again).
        assert ("flagged", threading.current_thread().name) in calls
        assert {mid for mid, _ in calls} == {"flagged"}
    finally:
        watcher.stop()


def test_a_stop_pushed_before_the_push_thread_subscribed_is_caught_when_it_subscribes(lcoordination):
    calls: list[str] = []
    watcher = StopWatcher(stops=lcoordination.stops, poll_seconds=300)
    # Registered without the registration's own check: only the subscription's poll can find it.
    watcher._regs.add(StopRegistration("m", on_stop=lambda: calls.append("m")))
    lcoordination.stops.set_stop_flag("m")  # its push comes before the subscription
    try:
        watcher.start()
        wait_for(lambda: calls, timeout=20, what="the stop, well before the 300 s poll")
    finally:
        watcher.stop()


def test_a_hung_body_that_ignores_stop_is_interrupted_after_the_grace(make_match, ctx, runner):
    from lifecycle.cleanup import stop_match_listener

    match = make_match(listener_start_settings={"listener_test_hang": True})
    future = runner(start, match, **ctx)
    wait_for(lambda: open_rows(match))
    begun = time.monotonic()
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=ctx["coordination"])
    result = future.result(timeout=5)
    assert result.exit_code == 15
    assert time.monotonic() - begun < ctx["services"].stop_grace_seconds + 1.0
    assert not ctx["coordination"].locks.start_lock(match.id).locked()


def test_a_graceful_worker_shutdown_ends_running_listeners_with_a_recorded_14(make_match, ctx, runner):
    matches = [make_match() for _ in range(3)]
    futures = [runner(start, m, **ctx) for m in matches]
    for m in matches:
        wait_for(lambda m=m: open_rows(m))
    wait_for(lambda: len(ctx["services"].running()) == 3)  # registered just after the row is written
    assert ctx["services"].shutdown_all() == 3
    for f in futures:
        assert f.result(timeout=3).exit_code == 14
    for m in matches:
        [row] = rows_of(m)
        assert row.exit_code == 14 and row.exit_reason == "worker shutdown"
        assert (
            not ctx["coordination"].barriers.is_pending(m.id)
            and not ctx["coordination"].locks.start_lock(m.id).locked()
        )
        assert ctx["coordination"].barriers.attempts(m.id) == 0


def test_a_run_holds_no_database_connection_while_the_game_runs(make_match, ctx, runner, monkeypatch):
    from models.db import database

    match = make_match()
    seen: list[bool] = []

    class Probe:
        def run(self, c):
            seen.append(database.is_closed())
            return 0

        def request_stop(self):
            pass

    import sys
    import types

    mod = types.ModuleType("tests_lifecycle_probe")
    mod.Probe = Probe
    sys.modules["tests_lifecycle_probe"] = mod
    monkeypatch.setenv("LISTENER_BODY", "tests_lifecycle_probe:Probe")  # the worker's environment
    assert runner(start, match, **ctx).result(timeout=5).exit_code == 0
    assert seen == [True]


def test_intervals_that_would_let_the_lock_expire_between_heartbeats_are_refused(lsettings, lcoordination):
    from config.errors import ConfigurationError
    from lifecycle.runtime import ListenerServices

    bad = lsettings.model_copy(update={"listener_heartbeat_interval_seconds": lcoordination.stale_seconds})
    with pytest.raises(ConfigurationError, match="LISTENER_HEARTBEAT_STALE_SECONDS"):
        ListenerServices(settings=bad, coordination=lcoordination)
