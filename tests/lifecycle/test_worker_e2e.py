"""End to end with a real ``dramatiq actors`` listener worker, on the Redis and on the RabbitMQ broker.

Hard kill, operator stop (running and queued) and graceful shutdown, with short intervals.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from config.clock import utcnow
from harness.background import BackgroundLoop, FirstSeen
from lifecycle import takeover
from lifecycle.cleanup import sweep_stale_match_listeners
from models.listener_record import MatchListenerRecord
from tests.lifecycle.conftest import BOTH_BROKERS
from tests.lifecycle.helpers import dispatch_now, open_rows, reload, rows_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, BOTH_BROKERS]

WORKER_ENV = {
    "BROKER_HEARTBEAT_TIMEOUT_SECONDS": "1",  # a killed worker's message is re-delivered quickly
    "BROKER_MAINTENANCE_CHANCE": "1000000",
}


class LiveMonitor(BackgroundLoop):
    """Samples lifecycle rows every 20 ms; records the most live (open, fresh) listeners of one match."""

    def __init__(self, match_id, stale_seconds: float) -> None:
        super().__init__()
        self.match_id = match_id
        self.stale = stale_seconds
        self.max_live = 0

    def step(self) -> None:
        cutoff = utcnow() - timedelta(seconds=self.stale)
        live = (
            MatchListenerRecord.select()
            .where(
                MatchListenerRecord.match == self.match_id,
                MatchListenerRecord.ended_at.is_null(),
                MatchListenerRecord.heartbeat_at >= cutoff,
            )
            .count()
        )
        self.max_live = max(self.max_live, live)


def test_hard_kill_goes_stale_then_abandoned_then_a_new_running_row_never_two_live(
    make_match, ctx, send_start, start_worker, worker_broker
):
    match = make_match(status="inprogress")
    stale = ctx["settings"].listener_heartbeat_stale_seconds
    with LiveMonitor(match.id, stale) as monitor:
        first = start_worker(env=WORKER_ENV)
        assert dispatch_now(ctx, send_start).enqueued == 1
        [old] = wait_for(lambda: open_rows(match), timeout=60)
        first.kill()
        wait_for(
            lambda: utcnow() - MatchListenerRecord.get_by_id(old.id).heartbeat_at > timedelta(seconds=stale)
        )
        assert MatchListenerRecord.get_by_id(old.id).badge(stale_after_seconds=stale).value == "Stale"
        second = start_worker(env=WORKER_ENV)
        if worker_broker == "redis":
            # The Redis broker re-delivers the dead worker's start; it must do nothing. (RabbitMQ
            # does not: the start was acked once consumed; see the settled-start test.)
            wait_for(lambda: "skipped_revoked" in second.output(), timeout=60)
        # The sweep abandons the stale row, unless the new worker's reaper saw first that the killed
        # worker's liveness signal had ended (issue 37) and abandoned it itself, or the re-delivered
        # start (its run never holding the match any more) sent the match again, whose dispatch
        # abandoned it as stale: one of them, once.
        swept = sweep_stale_match_listeners(settings=ctx["settings"], coordination=ctx["coordination"])
        closed = MatchListenerRecord.get_by_id(old.id)
        assert closed.exit_code == 14
        if swept.abandoned == 0:
            assert closed.exit_reason in (takeover.WORKER_DIED, "heartbeat stale")
        else:
            assert swept.abandoned == 1 and swept.matches == [str(match.id)]
        # The reaper may have dispatched the match again already (a death, or an abandoned run's orphan).
        assert dispatch_now(ctx, send_start).enqueued in (0, 1)
        wait_for(lambda: open_rows(match), timeout=60)
        time.sleep(3 * ctx["settings"].listener_heartbeat_interval_seconds)
    all_rows = rows_of(match)
    assert len(all_rows) == 2 and all_rows[0].exit_code == 14 and all_rows[1].ended_at is None
    assert all_rows[1].badge(stale_after_seconds=stale).value == "Running"
    assert monitor.max_live == 1


def test_stop_closes_the_running_row_with_15_within_2_s_and_the_match_is_not_re_dispatched(
    make_match, ctx, send_start, start_worker, subprocess_env, lifecycle_env
):
    match = make_match()
    start_worker()
    dispatch_now(ctx, send_start)
    [row] = wait_for(lambda: open_rows(match), timeout=60)
    lock = ctx["coordination"].locks.start_lock(match.id)
    wait_for(lock.locked, timeout=30, what="the listener holds its start lock")
    kickoff = str(Path(sys.executable).parent / "kickoff")
    with FirstSeen(lambda: not lock.locked()) as released:
        done = subprocess.run(
            [kickoff, "listeners", "stop", str(match.id), "--reason", "drill"],
            env={**subprocess_env, **lifecycle_env},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        assert "rows closed with 15" in done.stdout
        released_at = released.wait(30, "the start lock released")
    row = MatchListenerRecord.get_by_id(row.id)
    assert row.exit_code == 15 and row.stopped_by == "operator"
    # The command closes the row itself; the listener thread must end (lock released) within 2 s of it,
    # timed when the lock went, not when the command returned.
    ended = (released_at - row.ended_at).total_seconds()
    assert ended <= 2.0, f"listener ended {ended:.2f} s after its row was closed by the stop"
    assert reload(match).auto_dispatch_listener is False
    assert dispatch_now(ctx, send_start).eligible == 0


def test_a_stop_while_the_start_is_queued_prevents_the_start(make_match, ctx, send_start, start_worker):
    from lifecycle.cleanup import stop_match_listener

    match = make_match()
    assert dispatch_now(ctx, send_start).enqueued == 1
    stop_match_listener(str(match.id), settings=ctx["settings"], coordination=ctx["coordination"])
    worker = start_worker()
    wait_for(lambda: "skipped_revoked" in worker.output(), timeout=60)
    assert rows_of(match) == []


def test_sigterm_ends_running_listeners_with_a_recorded_14_and_releases_their_barriers(
    make_match, ctx, send_start, start_worker
):
    matches = [make_match() for _ in range(3)]
    worker = start_worker()
    assert dispatch_now(ctx, send_start).enqueued == 3
    for m in matches:
        wait_for(lambda m=m: open_rows(m), timeout=60)
    assert worker.terminate() == 0
    b = ctx["coordination"]
    for m in matches:
        [row] = rows_of(m)
        assert row.exit_code == 14 and row.exit_reason == "worker shutdown"
        # Released its lock, counted nothing, and handed the match off: a new start is queued.
        assert (
            not b.locks.start_lock(m.id).locked()
            and b.barriers.is_pending(m.id)
            and b.barriers.attempts(m.id) == 0
        )
    assert dispatch_now(ctx, send_start).enqueued == 0  # already queued: nothing is sent twice
    start_worker()  # the next listener worker takes the handed-off starts at once
    for m in matches:
        wait_for(lambda m=m: open_rows(m), timeout=30)
        assert len(open_rows(m)) == 1 and len(rows_of(m)) == 2
