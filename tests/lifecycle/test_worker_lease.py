"""Worker leases, the reaper, stops pushed over pub/sub and one clock, in process on the real services."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from config import clock
from config.settings import MatchListenerEnvironment
from harness.private_redis import PrivateRedis
from lifecycle.cleanup import (
    reap_dead_workers,
    reap_workers_seen_dead,
    release_locks_of_fenced_runs,
    stop_match_listener,
    sweep_stale_match_listeners,
)
from lifecycle.heartbeat import HeartbeatRegistration, HeartbeatService
from lifecycle.lease import LEASE_EXPIRED, WorkerLease
from lifecycle.runtime import ListenerServices
from lifecycle.takeover import WORKER_DIED
from models.coordination import CoordinationStore, connect_redis
from models.db import database
from models.listener_record import MatchListenerRecord
from tests.lifecycle.helpers import open_rows, rows_of, start
from tests.waiting import wait_for


def _epoch_aged(coordination, seconds: float) -> None:
    """Pretend Redis has kept its data for ``seconds`` (the reaper judges nothing before)."""
    now = int(coordination.client.time()[0])
    coordination.client.set(coordination.epoch_key, f"test:{now - int(seconds)}")


def _leased_row(match, lease_id: str, *, heartbeat_age: float = 0.0) -> str:
    record_id = str(uuid.uuid4())
    MatchListenerRecord.insert(
        id=record_id,
        match=match.id,
        worker_lease=lease_id,
        heartbeat_at=clock.utcnow() - timedelta(seconds=heartbeat_age),
    ).execute()
    return record_id


def test_a_lease_is_renewed_and_one_that_expired_is_never_renewed(lcoordination):
    lease = WorkerLease(locks=lcoordination.locks, ttl_seconds=5, fence_margin_seconds=1)
    first = lease.renew()
    assert first.lease_id and first.lost is None and not first.redis_reset
    key = lcoordination.worker_lease_key(first.lease_id)
    assert 0 < lcoordination.client.pttl(key) <= 5000
    assert lease.renew().lease_id == first.lease_id  # extended, same id
    assert lease.current(now=time.monotonic() + 4.5) is None  # past ttl - margin: fenced by time

    # A process too slow to notice (its fence lies past the TTL): the key expires in Redis first.
    slow = WorkerLease(locks=lcoordination.locks, ttl_seconds=2, fence_margin_seconds=-600)
    gone = slow.renew().lease_id
    wait_for(lambda: not lcoordination.client.exists(lcoordination.worker_lease_key(gone)), timeout=60)
    lapsed = slow.renew()
    assert lapsed.lease_id is None and lapsed.lost == gone
    assert not lcoordination.client.exists(lcoordination.worker_lease_key(gone))  # never brought back
    fresh = slow.renew()
    assert fresh.lease_id not in (None, gone) and fresh.lost is None


@pytest.mark.services  # a private redis-server of its own
def test_redis_losing_its_data_recreates_the_lease_instead_of_fencing_the_worker(lsettings, tmp_path):
    with PrivateRedis(tmp_path / "redis") as private:
        coordination = CoordinationStore(
            connect_redis(private.url()), prefix=lsettings.redis_key_prefix, url=private.url()
        )
        lease = WorkerLease(locks=coordination.locks, ttl_seconds=5, fence_margin_seconds=1)
        lease_id = lease.renew().lease_id
        private.restart()  # Redis comes back empty: the lease and the epoch are gone
        renewal = lease.renew()
        assert renewal.redis_reset and renewal.lease_id == lease_id and renewal.lost is None
        assert coordination.locks.live_worker_leases([lease_id])[0] == {lease_id}


def test_the_reaper_abandons_a_dead_workers_row_frees_its_lock_and_barriers(
    make_match, lsettings, lcoordination
):
    match = make_match(status="inprogress")
    record_id = _leased_row(match, "a-dead-worker")  # fresh heartbeat: only the lease says it is dead
    lcoordination.locks.start_lock(match.id).acquire(record_id)
    lcoordination.barriers.claim_pending(match.id)
    lcoordination.barriers.record_failed_attempt(match.id)
    _epoch_aged(lcoordination, 3600)
    [closed] = reap_dead_workers(settings=lsettings, coordination=lcoordination)
    assert closed.record_id == record_id
    row = MatchListenerRecord.get_by_id(record_id)
    assert row.exit_code == 14 and row.exit_reason == "worker lease expired"
    assert not lcoordination.locks.start_lock(match.id).locked()
    assert not lcoordination.barriers.is_pending(match.id) and lcoordination.barriers.attempts(match.id) == 0


def _fenced_row(match, lease_id: str, coordination) -> str:
    """A run that closed its own row (16, lease expired) but could not release its lock or pending key."""
    record_id = _leased_row(match, lease_id)
    MatchListenerRecord.update(ended_at=clock.utcnow(), exit_code=16, exit_reason=LEASE_EXPIRED).where(
        MatchListenerRecord.id == record_id
    ).execute()
    coordination.locks.start_lock(match.id).acquire(record_id)
    coordination.barriers.claim_pending(match.id)
    return record_id


def test_the_reaper_frees_the_lock_and_pending_key_a_fenced_run_closed_its_row_without(
    make_match, lsettings, lcoordination
):
    fenced, alive, taken = (make_match(status="inprogress") for _ in range(3))
    _fenced_row(fenced, "a-fenced-worker", lcoordination)
    lease = WorkerLease(locks=lcoordination.locks, ttl_seconds=30, fence_margin_seconds=1)
    _fenced_row(alive, lease.renew().lease_id, lcoordination)  # closed, but its process still lives
    gone = _fenced_row(taken, "another-fenced-worker", lcoordination)
    lcoordination.locks.start_lock(taken.id).adopt(gone).release()  # a later run took the lock meanwhile
    lcoordination.locks.start_lock(taken.id).acquire("a-later-run")
    _epoch_aged(lcoordination, 1)
    assert (
        release_locks_of_fenced_runs(settings=lsettings, coordination=lcoordination) == []
    )  # epoch too young
    _epoch_aged(lcoordination, 3600)
    assert reap_dead_workers(settings=lsettings, coordination=lcoordination) == []  # no open row to abandon
    assert release_locks_of_fenced_runs(settings=lsettings, coordination=lcoordination) == [str(fenced.id)]
    assert not lcoordination.locks.start_lock(fenced.id).locked() and not lcoordination.barriers.is_pending(
        fenced.id
    )
    assert lcoordination.locks.start_lock(alive.id).locked() and lcoordination.barriers.is_pending(alive.id)
    assert lcoordination.locks.start_lock_holder(
        taken.id
    ) == "a-later-run" and lcoordination.barriers.is_pending(taken.id)
    assert release_locks_of_fenced_runs(settings=lsettings, coordination=lcoordination) == []


def test_a_sweep_frees_a_fenced_runs_lock_too(make_match, lsettings, lcoordination):
    match = make_match(status="inprogress")
    _fenced_row(match, "a-fenced-worker", lcoordination)
    _epoch_aged(lcoordination, 3600)
    result = sweep_stale_match_listeners(settings=lsettings, coordination=lcoordination)
    assert result.locks_released == [str(match.id)] and result.abandoned == 0
    assert not lcoordination.locks.start_lock(match.id).locked() and not lcoordination.barriers.is_pending(
        match.id
    )


def test_the_reaper_judges_nothing_until_every_live_worker_could_recreate_its_lease(
    make_match, lsettings, lcoordination
):
    match = make_match(status="inprogress")
    _leased_row(match, "a-lease-redis-forgot")
    _epoch_aged(lcoordination, 1)  # Redis came back empty a second ago
    assert reap_dead_workers(settings=lsettings, coordination=lcoordination) == []
    assert len(open_rows(match)) == 1


def test_a_sweep_keeps_a_healthy_run_and_abandons_one_whose_worker_is_gone(
    make_match, lsettings, lcoordination
):
    healthy, dead = make_match(status="inprogress"), make_match(status="inprogress")
    lease = WorkerLease(locks=lcoordination.locks, ttl_seconds=30, fence_margin_seconds=1)
    _leased_row(healthy, lease.renew().lease_id)
    _leased_row(dead, "a-dead-worker")
    _epoch_aged(lcoordination, 3600)
    result = sweep_stale_match_listeners(settings=lsettings, coordination=lcoordination)
    assert result.abandoned == 1 and result.matches == [str(dead.id)]
    assert len(open_rows(healthy)) == 1 and open_rows(dead) == []


def test_a_start_takes_over_from_a_run_whose_worker_is_gone(make_match, ctx, runner):
    match = make_match(status="inprogress")
    old = _leased_row(match, "a-dead-worker")
    ctx["coordination"].locks.start_lock(match.id).acquire(old)
    _epoch_aged(ctx["coordination"], 3600)
    future = runner(start, match, **ctx)
    wait_for(lambda: [r for r in open_rows(match) if str(r.id) != old])
    assert MatchListenerRecord.get_by_id(old).exit_code == 14
    assert len(open_rows(match)) == 1
    ctx["services"].shutdown_all()
    assert future.result(timeout=5).exit_code == 14


class _AnsweringLocks:
    """The locks concern of ``_AnsweringRedis``: its lease renewals succeed."""

    def renew_worker_lease(self, lease_id, *, known_epoch, new_epoch_id, ttl_seconds):
        return 1, known_epoch or new_epoch_id


class _AnsweringRedis:
    """CoordinationStore whose lease renewals succeed (the heartbeat below never reaches Redis)."""

    def __init__(self) -> None:
        self.locks = _AnsweringLocks()


def test_a_beat_that_finds_the_lease_lapsed_stops_the_run_for_the_lease_not_for_its_lock():
    # The heartbeat may notice a lapsed lease before the stop watcher does: the run must still
    # record that its lease ran out, whichever thread tells it first.
    lease = WorkerLease(locks=_AnsweringLocks(), ttl_seconds=0.2, fence_margin_seconds=0.1)
    lease_id = lease.renew().lease_id
    lost: list[str] = []
    service = HeartbeatService(
        coordination=_AnsweringRedis(),
        interval_seconds=60,
        lock_ttl_seconds=600,
        grace_seconds=1,
        lease=lease,
    )
    service.register(HeartbeatRegistration("m", "t", "r", on_lost=lost.append, lease_id=lease_id))
    wait_for(lambda: lease.current() is None, timeout=30)
    report = service.beat_once()
    assert lost == [LEASE_EXPIRED] and report.lost == ("m",) and report.locks_extended == 0


def test_a_run_whose_lease_cannot_be_renewed_stops_itself_before_the_lease_expires(
    make_match, lifecycle_env, lcoordination, runner
):
    settings = MatchListenerEnvironment(_env_file=None, listener_worker_lease_seconds=2.0)
    services = ListenerServices(settings=settings, coordination=lcoordination)
    match = make_match()
    try:
        future = runner(start, match, settings=settings, coordination=lcoordination, services=services)
        [row] = wait_for(lambda: open_rows(match))
        lease_key = lcoordination.worker_lease_key(row.worker_lease)
        services.lease_keeper.stop()  # the renewals stop coming (Redis cut off, or the thread stuck)
        result = future.result(timeout=10)
        assert result.exit_code == 16 and result.reason == LEASE_EXPIRED
        assert rows_of(match)[0].exit_code == 16
        assert not lcoordination.locks.start_lock(match.id).locked()
        # The lapsed lease is dropped, never renewed: its key only runs out.
        assert services.lease.current() is None
        assert lcoordination.client.pttl(lease_key) <= 2000
    finally:
        services.shutdown_all()
        services.close()


def test_a_shutdown_keeps_streaming_until_its_successor_waits_which_starts_once_the_lock_is_free(
    make_match, lifecycle_env, lcoordination, runner
):
    # A bound far above the test's waits: only the waiting successor can end the old run. Both runs
    # judge staleness, lost locks and leases by minutes, not the in-process 1.5 s: a loaded box's
    # pause must not end the successor before the test looks at it.
    settings = MatchListenerEnvironment(
        _env_file=None,
        listener_handoff_seconds=60,
        listener_heartbeat_stale_seconds=120,
        listener_lock_loss_grace_seconds=30,
        listener_worker_lease_seconds=120,
    )
    lcoordination = CoordinationStore.from_settings(settings, client=lcoordination.client)
    sent: list[str] = []
    redispatched: list[str] = []
    old = ListenerServices(
        settings=settings, coordination=lcoordination, hand_over=sent.extend, redispatch=redispatched.extend
    )
    successor = ListenerServices(settings=settings, coordination=lcoordination)
    match = make_match()
    try:
        first = runner(start, match, settings=settings, coordination=lcoordination, services=old)
        [row] = wait_for(lambda: open_rows(match), timeout=60)
        # In its body (a run still starting when the shutdown begins is stopped at once, before its
        # body: listener_run), so that the hand-off is what ends it.
        wait_for(lambda: any(h.in_body for h in old.running()), timeout=60)
        old.shutdown_all()
        wait_for(lambda: sent == [str(match.id)], timeout=60)  # the successor start is queued first
        assert not first.done(), (first.result(), MatchListenerRecord.get_by_id(row.id).exit_reason)
        assert [r.id for r in open_rows(match)] == [row.id]  # still streaming
        second = runner(
            start, match, settings=settings, coordination=lcoordination, services=successor, handoff=True
        )
        assert first.result(timeout=30).exit_code == 14
        [new] = wait_for(lambda: [r for r in open_rows(match) if r.id != row.id], timeout=60)
        old_row = MatchListenerRecord.get_by_id(row.id)
        assert old_row.exit_reason == "worker shutdown" and new.created_at >= old_row.ended_at
        assert lcoordination.locks.start_lock_holder(match.id) == str(new.id)
        assert not second.done() and redispatched == []  # no second start: the successor runs
    finally:
        successor.shutdown_all()
        old.close()
        successor.close()


def test_an_operator_stop_is_pushed_to_the_running_listener_without_waiting_for_the_poll(
    make_match, lifecycle_env, lcoordination, runner
):
    # Poll and heartbeat minutes apart: only the push can end the run within the 30 s allowed
    # (generous for a loaded machine; the push takes milliseconds).
    settings = MatchListenerEnvironment(
        _env_file=None,
        listener_stop_poll_seconds=300,
        listener_heartbeat_interval_seconds=120,
        listener_heartbeat_stale_seconds=600,
        listener_worker_lease_seconds=600,
    )
    lcoordination = CoordinationStore.from_settings(settings, client=lcoordination.client)
    services = ListenerServices(settings=settings, coordination=lcoordination)
    match = make_match()
    try:
        future = runner(start, match, settings=settings, coordination=lcoordination, services=services)
        wait_for(lambda: open_rows(match))
        wait_for(lambda: lcoordination.client.pubsub_numsub(lcoordination.stop_channel)[0][1] >= 1)
        stop_match_listener(str(match.id), settings=settings, coordination=lcoordination)
        result = future.result(timeout=30)
        assert result.exit_code == 15
    finally:
        services.shutdown_all()
        services.close()


@pytest.mark.parametrize(
    "offset_minutes", [-5, 5], ids=["worker-clock-5-min-slow", "worker-clock-5-min-fast"]
)
def test_heartbeat_age_is_judged_by_postgresql_not_the_workers_clock(offset_minutes, make_match, ctx, runner):
    alive, dead = make_match(status="inprogress"), make_match(status="inprogress")
    # A dead run: its heartbeat is ten seconds old by the database's clock (stale is 1.5 s).
    database.execute_sql(
        "INSERT INTO match_listener_records (id, match_id, created_at, heartbeat_at) "
        "VALUES (%s, %s, now() - interval '10 seconds', now() - interval '10 seconds')",
        (uuid.uuid4(), dead.id),
    )
    clock.set_clock(lambda: datetime.now(UTC) + timedelta(minutes=offset_minutes))
    try:
        future = runner(start, alive, **ctx)
        wait_for(lambda: open_rows(alive))
        time.sleep(3 * ctx["settings"].listener_heartbeat_interval_seconds)  # a few beats
        result = sweep_stale_match_listeners(settings=ctx["settings"], coordination=ctx["coordination"])
        assert result.matches == [str(dead.id)]  # the dead one is abandoned, the live one is not
        assert len(open_rows(alive)) == 1 and not future.done()
    finally:
        clock.set_clock(None)
        ctx["services"].shutdown_all()


def test_a_listener_workers_reaper_takes_its_full_step_every_poll_and_only_watches_in_between(lcoordination):
    settings = MatchListenerEnvironment(
        _env_file=None, listener_reaper_poll_seconds=0.5, listener_liveness_watch_seconds=0.05
    )
    services = ListenerServices(settings=settings, coordination=lcoordination)
    try:
        reaper = services.reaper
        assert reaper.period_seconds() == 0.05  # a watch (Redis alone) every LISTENER_LIVENESS_WATCH_SECONDS
        # ... and the full (PostgreSQL) step once per LISTENER_REAPER_POLL_SECONDS, not at every watch.
        assert reaper.full_step_due(now=100.0)
        assert not reaper.full_step_due(now=100.05) and not reaper.full_step_due(now=100.45)
        assert reaper.full_step_due(now=100.5)
    finally:
        services.close()


def test_a_watch_that_judged_a_worker_dead_abandons_only_its_rows_and_frees_their_locks(
    make_match, lcoordination
):
    dead, alive = make_match(), make_match()
    record_id = _leased_row(dead, "a-dead-worker")
    lcoordination.locks.start_lock(dead.id).acquire(record_id)
    live_id = _leased_row(alive, "a-live-worker")
    lcoordination.locks.start_lock(alive.id).acquire(live_id)
    closed = reap_workers_seen_dead(["a-dead-worker"], coordination=lcoordination)
    assert [row.record_id for row in closed] == [record_id]
    row = MatchListenerRecord.get_by_id(record_id)
    assert row.exit_code == 14 and row.exit_reason == WORKER_DIED  # the death_seen takeover path
    assert lcoordination.locks.start_lock_holder(dead.id) is None  # its match can start again at once
    assert MatchListenerRecord.get_by_id(live_id).ended_at is None
    assert lcoordination.locks.start_lock_holder(alive.id) == live_id
