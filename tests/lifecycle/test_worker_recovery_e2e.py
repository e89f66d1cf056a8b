"""Real listener workers killed, paused or stopped mid-game: their matches stream again soon, never twice.

These run at the default lease (8 s), reaper poll (0.5 s) and hand-off bound (5 s) and a stale
threshold of 180 s, so only the worker lease (or the hand-off) can bring a match back before the
test's deadline: the heartbeat's stale path would need minutes.
"""

from __future__ import annotations

import time

import pytest

from harness.private_redis import PrivateRedis
from lifecycle.takeover import WORKER_DIED
from models.listener_record import MatchListenerRecord
from tests.intervals import SLACK_SECONDS
from tests.lifecycle.conftest import BOTH_BROKERS, ON_AMQP, REAL_WORKER_CTX, REAL_WORKER_DEFAULTS
from tests.lifecycle.helpers import OpenRowMonitor, dispatch_now, open_rows, rows_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, REAL_WORKER_CTX]

DEFAULTS = REAL_WORKER_DEFAULTS
ON_AMQP_ONLY = pytest.mark.parametrize("worker_broker", [ON_AMQP], indirect=True)
#: Before the stale path could act (180 s), long after the lease path should have (10 s).
RECOVERY_DEADLINE = 120.0
#: The README's goal for a killed worker's matches (10 s, p99 at default settings; the lease path:
#: an 8 s lease, the reaper's poll, a start), with the loaded box's slack twice (the kill's
#: detection and the successor's start).
RECOVERY_GOAL_SECONDS = 10.0 + 2 * SLACK_SECONDS


def _restarted(match, old_id) -> bool:
    return any(str(r.id) != str(old_id) for r in open_rows(match))


def _streaming_on_a_worker(matches, ctx, send_start, start_worker):
    """A worker (at DEFAULTS) streaming ``matches``, and the id of each match's open row on it."""
    worker = start_worker(env=DEFAULTS)
    assert dispatch_now(ctx, send_start).enqueued == len(matches)
    return worker, {m.id: wait_for(lambda m=m: open_rows(m), timeout=30)[0].id for m in matches}


def _wait_restarted(matches, old, *, interval: float) -> None:
    for m in matches:
        wait_for(lambda m=m: _restarted(m, old[m.id]), timeout=RECOVERY_DEADLINE, interval=interval)


def _old_and_new_rows(match, *, reason: str):
    """The match's two rows: the first closed 14 with ``reason``, the second open under another lease."""
    first, second = rows_of(match)
    assert first.exit_code == 14 and first.exit_reason == reason
    assert second.ended_at is None and second.worker_lease != first.worker_lease
    return first, second


# On Redis the same kill (and the pause below) is played with the real listener body and srsim by
# tests/lifecycle/test_gapless_e2e.py, which also checks every event of the games: here RabbitMQ.
@ON_AMQP_ONLY
def test_a_hard_killed_listener_workers_matches_stream_again_on_another_worker_within_seconds(
    make_match, ctx, send_start, start_worker
):
    matches = [make_match(status="inprogress") for _ in range(3)]
    with OpenRowMonitor(m.id for m in matches) as monitor:
        doomed, old = _streaming_on_a_worker(matches, ctx, send_start, start_worker)
        survivor = start_worker(env=DEFAULTS)
        killed_at = time.monotonic()
        doomed.kill()
        _wait_restarted(matches, old, interval=0.2)
        recovered_in = time.monotonic() - killed_at
    assert recovered_in < RECOVERY_GOAL_SECONDS, f"kill to streaming again: {recovered_in:.1f} s"
    for m in matches:
        _old_and_new_rows(m, reason=WORKER_DIED)  # its liveness signal ended with it: no lease wait
    assert "matches of dead listener workers" in survivor.output()  # the survivor's reaper restarted them
    assert monitor.max_open == 1  # never two open rows for one match


@BOTH_BROKERS
def test_a_sigterm_hands_each_match_over_to_the_other_worker_which_starts_as_the_old_run_stops(
    make_match, ctx, send_start, start_worker
):
    matches = [make_match(status="inprogress") for _ in range(2)]
    with OpenRowMonitor(m.id for m in matches) as monitor:
        old_worker, old = _streaming_on_a_worker(matches, ctx, send_start, start_worker)
        start_worker(env=DEFAULTS)
        old_worker.terminate(timeout=60)  # the deploy's graceful stop, the new worker already up
        _wait_restarted(matches, old, interval=0.1)
    for m in matches:
        first, second = _old_and_new_rows(m, reason="worker shutdown")
        assert second.created_at >= first.ended_at  # the successor's row opened after the old one closed
    out = old_worker.output()
    assert out.count("its successor waits: handed over") == 2  # handed over, not stopped then sent
    assert "no successor waited" not in out
    assert monitor.max_open == 1  # never two open rows (two streams) for one match


def test_a_listener_worker_reconnects_after_the_brokers_redis_restarts_and_takes_new_starts(
    make_match, ctx, start_worker, tmp_path
):
    from actors.broker import build_broker
    from actors.listeners import start_message

    with PrivateRedis(tmp_path / "broker-redis") as broker_redis:
        bsettings = ctx["settings"].model_copy(update={"broker_url": broker_redis.url()})
        broker = build_broker(bsettings)

        def send(message) -> None:
            broker.enqueue(start_message(message))

        first = make_match(status="inprogress")
        start_worker(env={**DEFAULTS, "BROKER_URL": broker_redis.url()})
        assert dispatch_now(ctx, send).enqueued == 1
        [running] = wait_for(lambda: open_rows(first), timeout=30)

        broker_redis.restart(down_seconds=1.0)  # queues, acks and worker heartbeats are gone
        second = make_match(status="inprogress")
        assert dispatch_now(ctx, send).enqueued == 1  # the first match still streams: only the second
        wait_for(lambda: open_rows(second), timeout=RECOVERY_DEADLINE, interval=0.2)
        assert [r.id for r in open_rows(first)] == [running.id]  # never interrupted
        broker.close()


@BOTH_BROKERS
def test_rerunning_the_deploy_beside_healthy_real_listeners_closes_none_of_them(
    make_match, ctx, send_start, start_worker, deploy
):
    matches = [make_match(status="inprogress") for _ in range(3)]
    start_worker(env=DEFAULTS)
    assert dispatch_now(ctx, send_start).enqueued == 3
    before = {m.id: wait_for(lambda m=m: open_rows(m), timeout=30)[0] for m in matches}
    out = deploy("true")
    assert "0 rows abandoned" in out
    for m in matches:
        [row] = open_rows(m)
        assert row.id == before[m.id].id and row.exit_code is None
    # Still streaming: every heartbeat moves on after the deploy.
    for m in matches:
        beat = before[m.id].heartbeat_at
        wait_for(
            lambda m=m, beat=beat: MatchListenerRecord.get_by_id(before[m.id].id).heartbeat_at > beat,
            timeout=30,
        )
    assert all(len(rows_of(m)) == 1 for m in matches)


@BOTH_BROKERS
def test_a_graceful_restart_through_the_deploy_streams_every_match_again_once_the_new_worker_is_up(
    make_match, ctx, send_start, start_worker, deploy
):
    matches = [make_match(status="inprogress") for _ in range(3)]
    old_worker = start_worker(env=DEFAULTS)
    assert dispatch_now(ctx, send_start).enqueued == 3
    for m in matches:
        wait_for(lambda m=m: open_rows(m), timeout=30)
    pid = old_worker.proc.pid
    # SIGTERM, then wait until it has exited (a zombie of this test counts as exited).
    restart = f"kill -TERM {pid}; while ps -o stat= -p {pid} | grep -qv Z; do sleep 0.2; done"
    deploy(restart)
    for m in matches:
        [old] = rows_of(m)
        assert old.exit_code == 14 and old.exit_reason == "worker shutdown"
    start_worker(env=DEFAULTS)
    up_at = time.monotonic()
    for m in matches:
        wait_for(lambda m=m: open_rows(m), timeout=60, interval=0.1)
    took = time.monotonic() - up_at
    assert took < RECOVERY_GOAL_SECONDS, f"streaming again {took:.1f} s after the new worker was up"
    assert all(len(rows_of(m)) == 2 and len(open_rows(m)) == 1 for m in matches)
