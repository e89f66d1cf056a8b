"""The lifecycle's decisions on the in-memory coordination store (tests/fakes/coordination/): no Redis.

What is decided here (a lease fenced or re-created, a stop heard or ignored, a lock lost, a
dispatch skipping a pending or exhausted match, a failed send releasing its claim) is the same
code the service tests run on Redis and PostgreSQL; the database's part (the candidate query,
the message ids, the rows) is replaced by its answers. The real-service tests stay the proof of
behaviour (test_worker_lease.py, test_heartbeat_and_stop_watch.py, test_dedupe_and_locks.py ...).
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from config.errors import BrokerUnavailable, ConfigurationError, RedisUnavailable
from lifecycle import cleanup, dispatch, liveness, takeover
from lifecycle.dispatch import StartMessage, _send_all, cycle_collection_paused
from lifecycle.errors import WorkerLeaseUnavailable
from lifecycle.heartbeat import LOCK_UNREACHABLE, HeartbeatRegistration, HeartbeatService
from lifecycle.lease import LEASE_EXPIRED, WorkerLease
from lifecycle.liveness import LivenessSignal
from lifecycle.runtime import ListenerServices, worker_shutdown
from lifecycle.sql.rows import ClosedRow
from lifecycle.stop_watch import StopRegistration, StopWatcher
from tests.fakes.coordination import ManualClock, MemoryCoordinationStore
from tests.waiting import wait_for


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> MemoryCoordinationStore:
    return MemoryCoordinationStore(clock=clock, stale_seconds=60.0, attempt_cap=3)


def match_ids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


# -- the worker lease ------------------------------------------------------------------------


def lease_on(store: MemoryCoordinationStore) -> WorkerLease:
    return WorkerLease(locks=store.locks, ttl_seconds=8.0, fence_margin_seconds=3.0)


def test_a_first_renewal_takes_a_lease_that_runs_may_start_under(store: MemoryCoordinationStore) -> None:
    lease = lease_on(store)
    assert lease.current() is None
    renewal = lease.renew()
    assert renewal.lease_id is not None and renewal.lost is None and not renewal.redis_reset
    assert lease.current() == renewal.lease_id
    assert store.locks.live_worker_leases([renewal.lease_id])[0] == {renewal.lease_id}


def test_a_lease_is_renewed_every_quarter_of_its_ttl(store: MemoryCoordinationStore) -> None:
    assert lease_on(store).renew_seconds == 2.0


def test_a_renewal_keeps_the_same_lease(store: MemoryCoordinationStore) -> None:
    lease = lease_on(store)
    first = lease.renew().lease_id
    assert lease.renew().lease_id == first


def test_a_lease_is_fenced_once_ttl_minus_margin_passed_without_a_renewal(
    store: MemoryCoordinationStore,
) -> None:
    lease = lease_on(store)
    before = time.monotonic()
    lease_id = lease.renew().lease_id
    after = time.monotonic()  # the renewal was sent between the two: the fence is 5 s after it
    assert lease.holds(lease_id, before + 4.9)
    assert not lease.holds(lease_id, after + 5.0)
    assert lease.current(after + 5.0) is None


def test_a_run_without_a_lease_may_always_write(store: MemoryCoordinationStore) -> None:
    assert lease_on(store).holds(None)


def test_a_fenced_lease_is_reported_once_and_dropped(store: MemoryCoordinationStore) -> None:
    lease = lease_on(store)
    lease_id = lease.renew().lease_id
    late = time.monotonic() + 6
    assert lease.fenced_lease(late) == lease_id
    assert lease.fenced_lease(late) is None


def test_a_lease_that_expired_in_redis_under_the_same_epoch_is_lost(
    store: MemoryCoordinationStore, clock: ManualClock
) -> None:
    lease = lease_on(store)
    lease_id = lease.renew().lease_id
    clock.advance(9)  # the key expired: the process was paused longer than the lease
    renewal = lease.renew()
    assert renewal == type(renewal)(lease_id=None, lost=lease_id, redis_reset=False)
    assert lease.current() is None
    fresh = lease.renew()
    assert fresh.lease_id not in (None, lease_id)


def test_a_lease_lost_with_redis_data_is_re_created_not_fenced(store: MemoryCoordinationStore) -> None:
    lease = lease_on(store)
    lease_id = lease.renew().lease_id
    store.forget_everything()
    renewal = lease.renew()
    assert renewal.lease_id == lease_id and renewal.redis_reset and renewal.lost is None
    assert store.locks.live_worker_leases([lease_id])[0] == {lease_id}


def test_a_renewal_redis_does_not_answer_holds_no_lease_and_never_raises(
    store: MemoryCoordinationStore,
) -> None:
    lease = lease_on(store)
    store.down = True
    assert lease.renew().lease_id is None
    with pytest.raises(WorkerLeaseUnavailable):
        lease.require()


def test_require_renews_once_when_no_lease_is_held(store: MemoryCoordinationStore) -> None:
    lease = lease_on(store)
    lease_id = lease.require()
    assert lease.require() == lease_id


# -- the stop watcher ------------------------------------------------------------------------


class Stops:
    """Counts the stop callbacks of registered runs."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def registration(self, match_id: str) -> StopRegistration:
        return StopRegistration(match_id=match_id, on_stop=lambda: self.calls.append(match_id))


@pytest.fixture
def stops() -> Stops:
    return Stops()


@pytest.fixture
def watcher(store: MemoryCoordinationStore) -> StopWatcher:
    """A stop watcher whose threads are not started (the test calls its steps)."""
    return StopWatcher(stops=store.stops, poll_seconds=60)


def watching(watcher: StopWatcher, stops: Stops, n: int) -> list[str]:
    """``n`` runs registered with ``watcher`` (threads not started); their match ids."""
    ids = match_ids(n)
    for m in ids:
        watcher._regs.add(stops.registration(m))
    return ids


def test_a_poll_stops_only_the_flagged_runs(store: MemoryCoordinationStore, watcher, stops) -> None:
    flagged, _ = watching(watcher, stops, 2)
    store.stops.set_stop_flag(flagged)
    assert watcher.poll_once() == {flagged}
    assert stops.calls == [flagged]


def test_a_poll_with_nothing_registered_reads_nothing(store: MemoryCoordinationStore) -> None:
    store.down = True
    assert StopWatcher(stops=store.stops, poll_seconds=60).poll_once() == set()


def test_a_poll_redis_does_not_answer_stops_nothing(store: MemoryCoordinationStore, watcher, stops) -> None:
    (m,) = watching(watcher, stops, 1)
    store.stops.set_stop_flag(m)
    store.down = True
    assert watcher.poll_once() == set()
    assert stops.calls == []


def test_a_failing_stop_callback_does_not_keep_the_others_from_stopping(
    store: MemoryCoordinationStore, watcher, stops
) -> None:
    (fine,) = watching(watcher, stops, 1)
    (broken,) = match_ids(1)

    def explode() -> None:
        raise RuntimeError("callback bug")

    watcher._regs.add(StopRegistration(match_id=broken, on_stop=explode))
    store.stops.set_stop_flag(broken)
    store.stops.set_stop_flag(fine)
    assert watcher.poll_once() == {broken, fine}
    assert stops.calls == [fine]


def test_a_pushed_stop_is_obeyed_only_while_the_flag_is_set(
    store: MemoryCoordinationStore, watcher, stops
) -> None:
    (m,) = watching(watcher, stops, 1)
    watcher.stop_pushed(m)  # a stale push: the flag was cleared (a later run)
    assert stops.calls == []
    store.stops.set_stop_flag(m)
    watcher.stop_pushed(m)
    assert stops.calls == [m]
    watcher.stop_pushed(match_ids(1)[0])  # not a run of this process
    assert stops.calls == [m]


def test_a_pushed_stop_with_an_unreadable_flag_is_left_to_the_poll(
    store: MemoryCoordinationStore, watcher, stops
) -> None:
    (m,) = watching(watcher, stops, 1)
    store.stops.set_stop_flag(m)
    store.down = True
    watcher.stop_pushed(m)
    assert stops.calls == []


def test_the_push_thread_stops_a_run_as_soon_as_the_stop_is_published(store: MemoryCoordinationStore) -> None:
    stops = Stops()
    watcher = StopWatcher(stops=store.stops, poll_seconds=3600)  # the poll never runs in this test
    (m,) = match_ids(1)
    watcher.register(stops.registration(m))
    try:
        wait_for(lambda: store.subscriptions, what="the stop subscription")
        store.stops.set_stop_flag(m)
        wait_for(lambda: stops.calls == [m], what="the pushed stop")
    finally:
        watcher.stop()


def test_a_step_runs_the_tick_even_when_the_poll_fails(store: MemoryCoordinationStore) -> None:
    ticks: list[int] = []
    watcher = StopWatcher(stops=store.stops, poll_seconds=60, tick=lambda: ticks.append(1))
    watcher._regs.add(Stops().registration(match_ids(1)[0]))
    store.down = True
    watcher.step()
    assert ticks == [1]


# -- the heartbeat's lock decisions (dry runs: no row) ----------------------------------------


def beating(store: MemoryCoordinationStore, *, lease: WorkerLease | None = None) -> HeartbeatService:
    return HeartbeatService(
        coordination=store, interval_seconds=5, lock_ttl_seconds=60, grace_seconds=2, lease=lease
    )


def dry_run(match_id: str, token: str, lost: list[str], **fields: Any) -> HeartbeatRegistration:
    return HeartbeatRegistration(
        match_id=match_id, token=token, record_id=None, on_lost=lost.append, **fields
    )


def test_a_beat_extends_the_lock_of_every_run_it_holds(
    store: MemoryCoordinationStore, clock: ManualClock
) -> None:
    service = beating(store)
    a, b = match_ids(2)
    lost: list[str] = []
    for m, token in ((a, "ta"), (b, "tb")):
        store.locks.start_lock(m).acquire(token=token)
        service._regs.add(dry_run(m, token, lost))
    clock.advance(50)
    report = service.beat_once()
    assert (report.locks_extended, report.lost, lost) == (2, (), [])
    assert store.ttl(store.start_lock_key(a)) == pytest.approx(60)


def test_a_run_whose_lock_another_holder_took_is_told_to_stop(store: MemoryCoordinationStore) -> None:
    service = beating(store)
    (m,) = match_ids(1)
    store.locks.start_lock(m).acquire(token="successor")
    lost: list[str] = []
    service._regs.add(dry_run(m, "mine", lost))
    assert service.beat_once().lost == (m,)
    assert lost == ["start lock lost"]
    assert store.locks.start_lock_holder(m) == "successor"


@pytest.mark.parametrize("then", ["nothing", "a successor starts"])
def test_a_run_that_ends_while_the_beat_runs_is_not_told_to_stop_nor_its_lock_kept(
    then: str, store: MemoryCoordinationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its lock and row were let go by the run itself: the beat neither stops it nor keeps its lock."""
    service = beating(store)
    (m,) = match_ids(1)
    lost: list[str] = []
    reg = dry_run(m, "mine", lost)
    lock = store.locks.start_lock(m)
    lock.acquire(token="mine")
    service._regs.add(reg)
    extend = store.locks.extend_start_locks

    def the_run_ends_first(*args: Any, **kwargs: Any) -> Any:
        service.unregister(reg)
        lock.release()
        if then == "a successor starts":
            store.locks.start_lock(m).acquire(token="successor")
        return extend(*args, **kwargs)

    monkeypatch.setattr(store.locks, "extend_start_locks", the_run_ends_first)
    assert service.beat_once().lost == () and lost == []
    # the extension takes a missing lock again (Redis lost it, as far as it knows): let go again
    assert store.locks.start_lock_holder(m) == (None if then == "nothing" else "successor")


def test_releasing_a_dead_workers_start_locks_with_redis_away_releases_nothing_and_lets_the_reaper_go_on(
    store: MemoryCoordinationStore,
) -> None:
    (m,) = match_ids(1)
    store.locks.start_lock(m).acquire(token="t")
    store.locks.note_start_taken("dead", m, "t", ttl_seconds=60)
    store.down = True
    assert cleanup.release_starts_of_dead(["dead"], coordination=store) == []  # no raise: logged
    store.down = False
    assert cleanup.release_starts_of_dead(["dead"], coordination=store) == [m]
    assert store.locks.start_lock_holder(m) is None


def test_a_beat_retakes_a_lock_redis_forgot(store: MemoryCoordinationStore) -> None:
    service = beating(store)
    (m,) = match_ids(1)
    store.locks.start_lock(m).acquire(token="mine")
    store.forget_everything()
    lost: list[str] = []
    service._regs.add(dry_run(m, "mine", lost))
    assert service.beat_once().locks_extended == 1
    assert store.locks.start_lock_holder(m) == "mine" and lost == []


def test_a_beat_redis_does_not_answer_stops_a_run_only_when_its_lock_could_lapse(
    store: MemoryCoordinationStore,
) -> None:
    service = beating(store)
    fresh, old = match_ids(2)
    lost: list[str] = []
    now = time.monotonic()
    service._regs.add(dry_run(fresh, "t1", lost, last_lock_ok=now))
    service._regs.add(dry_run(old, "t2", lost, last_lock_ok=now - 54))
    store.down = True
    assert service.beat_once().lost == (old,)
    assert lost == [LOCK_UNREACHABLE]


def test_a_run_under_a_lapsed_lease_is_stopped_without_touching_its_lock(
    store: MemoryCoordinationStore,
) -> None:
    lease = lease_on(store)
    service = beating(store, lease=lease)
    (m,) = match_ids(1)
    store.locks.start_lock(m).acquire(token="t")
    lost: list[str] = []
    service._regs.add(dry_run(m, "t", lost, lease_id="a-lease-this-process-no-longer-holds"))
    report = service.beat_once()
    assert (report.locks_extended, lost) == (0, [LEASE_EXPIRED])


def test_deadlines_stop_runs_whose_lock_was_not_renewed_in_time(store: MemoryCoordinationStore) -> None:
    service = beating(store)
    lost: list[str] = []
    now = time.monotonic()
    (m,) = match_ids(1)
    service._regs.add(dry_run(m, "t", lost, last_lock_ok=now))
    assert service.enforce_deadlines(now + 52) == []
    assert service.enforce_deadlines(now + 53) == [m]
    assert lost == [LOCK_UNREACHABLE]


# -- the dispatch tick's decisions (its database answers given) -------------------------------


BROKER_DOWN = BrokerUnavailable(service="RabbitMQ", setting="BROKER_URL", address="amqp://x", reason="down")


class Sent:
    """A recording sender; ``refuse`` names matches whose send raises, ``down`` makes every send fail."""

    def __init__(self, *, refuse: set[str] = frozenset(), down: bool = False) -> None:
        self.messages: list[StartMessage] = []
        self.refuse = refuse
        self.down = down

    def __call__(self, message: StartMessage) -> None:
        if self.down:
            raise BROKER_DOWN
        if message.match_id in self.refuse:
            raise ValueError("message too large\nsecond line")
        self.messages.append(message)

    def batch(self, messages: list[StartMessage]) -> None:
        if self.down:
            raise BROKER_DOWN
        if any(m.match_id in self.refuse for m in messages):
            raise ValueError("one message the broker would not take")
        self.messages.extend(messages)


@pytest.fixture
def selection(monkeypatch: pytest.MonkeyPatch, settings) -> Any:
    """``selection(ids)``: the candidate query finds ``ids``; message ids and stale rows need no database."""
    found: list[tuple[str, bool, Any]] = []
    monkeypatch.setattr(dispatch, "find_candidates", lambda **_: list(found))
    monkeypatch.setattr(dispatch.rows, "abandon_stale_rows", lambda **_: [])
    monkeypatch.setattr(
        dispatch, "store_new_message_ids", lambda ids: [f"start-match-listener.{m}.test" for m in ids]
    )

    def select(ids: list[str], *, stored: dict[str, Any] | None = None) -> None:
        found[:] = [(m, False, (stored or {}).get(m)) for m in ids]

    return select


def tick(
    store: MemoryCoordinationStore, settings, sent: Sent, *, batch: bool = False
) -> dispatch.DispatchResult:
    return dispatch._dispatch(
        within=0,
        is_test=None,
        settings=settings,
        coordination=store,
        send=sent,
        send_batch=sent.batch if batch else None,
    )


def test_a_tick_with_no_candidates_sends_nothing(store: MemoryCoordinationStore, settings, selection) -> None:
    selection([])
    assert tick(store, settings, Sent()) == dispatch.DispatchResult()


def test_a_tick_claims_and_sends_one_start_per_candidate(
    store: MemoryCoordinationStore, settings, selection
) -> None:
    ids = match_ids(3)
    selection(ids)
    sent = Sent()
    result = tick(store, settings, sent)
    assert (result.eligible, result.enqueued, result.match_ids) == (3, 3, ids)
    assert [m.match_id for m in sent.messages] == ids
    assert all(store.barriers.is_pending(m) for m in ids)


def test_a_tick_skips_pending_and_exhausted_matches(
    store: MemoryCoordinationStore, settings, selection
) -> None:
    queued, spent, free = match_ids(3)
    store.barriers.claim_pending(queued)
    for _ in range(3):
        store.barriers.record_failed_attempt(spent)
    selection([queued, spent, free])
    result = tick(store, settings, Sent())
    assert (result.enqueued, result.skipped, result.exhausted, result.match_ids) == (1, 1, 1, [free])
    assert not store.barriers.is_pending(spent)


def test_a_second_tick_sends_nothing_while_the_starts_are_pending(
    store: MemoryCoordinationStore, settings, selection
) -> None:
    ids = match_ids(2)
    selection(ids)
    tick(store, settings, Sent())
    assert tick(store, settings, Sent()).skipped == 2


def test_a_send_the_broker_refused_releases_its_claim(
    store: MemoryCoordinationStore, settings, selection
) -> None:
    ids = match_ids(2)
    selection(ids)
    result = tick(store, settings, Sent(down=True))
    assert (result.enqueued, result.failed, result.set_aside) == (0, 2, [])
    assert not any(store.barriers.is_pending(m) for m in ids)


def test_a_message_that_cannot_be_sent_is_set_aside_and_the_others_go(
    store: MemoryCoordinationStore, settings, selection
) -> None:
    bad, good = match_ids(2)
    selection([bad, good])
    result = tick(store, settings, Sent(refuse={bad}), batch=True)
    assert (result.match_ids, result.failed) == ([good], 1)
    assert [a["item"] for a in result.set_aside] == [bad]
    assert "ValueError: message too large" in result.set_aside[0]["reason"]
    assert store.barriers.is_pending(good) and not store.barriers.is_pending(bad)


def test_a_batch_the_broker_refused_fails_whole(store: MemoryCoordinationStore, settings, selection) -> None:
    ids = match_ids(3)
    selection(ids)
    result = tick(store, settings, Sent(down=True), batch=True)
    assert (result.enqueued, result.failed) == (0, 3)
    assert not any(store.barriers.is_pending(m) for m in ids)


def test_a_match_with_unusable_stored_settings_is_set_aside_unclaimed(
    store: MemoryCoordinationStore, settings, selection
) -> None:
    poisoned, fine = match_ids(2)
    selection([poisoned, fine], stored={poisoned: {"listener_heartbeat_interval_seconds": "often"}})
    result = tick(store, settings, Sent())
    assert result.match_ids == [fine]
    assert [a["item"] for a in result.set_aside] == [poisoned]
    assert not store.barriers.is_pending(poisoned)


def test_a_dispatch_lock_held_elsewhere_skips_the_tick(
    store: MemoryCoordinationStore, settings, selection
) -> None:
    selection(match_ids(1))
    assert store.locks.dispatch_lock().acquire()
    result = dispatch.dispatch_upcoming_match_listeners(settings=settings, coordination=store, send=Sent())
    assert result.locked and result.enqueued == 0


def test_a_tick_under_the_lock_releases_it(store: MemoryCoordinationStore, settings, selection) -> None:
    selection(match_ids(1))
    assert (
        dispatch.dispatch_upcoming_match_listeners(
            settings=settings, coordination=store, send=Sent()
        ).enqueued
        == 1
    )
    assert not store.locks.dispatch_lock().locked()


def test_send_all_one_by_one_reports_sent_failed_and_set_aside() -> None:
    ok, refused, m = StartMessage("a", "ma"), StartMessage("b", "mb"), StartMessage("c", "mc")
    sent, failed, aside = _send_all([ok, refused, m], send=Sent(refuse={"b"}), send_batch=None)
    assert (sent, failed, [a.item for a in aside]) == (["a", "c"], ["b"], ["b"])


def test_send_all_sends_a_good_batch_in_one_call() -> None:
    sender = Sent()
    messages = [StartMessage("a", "ma"), StartMessage("b", "mb")]
    assert _send_all(messages, send=lambda _: pytest.fail("one by one"), send_batch=sender.batch) == (
        ["a", "b"],
        [],
        [],
    )


def test_send_all_sends_batches_until_the_broker_refuses_one_and_fails_that_one_and_the_rest() -> None:
    messages = [StartMessage(f"m{n}", f"id{n}") for n in range(dispatch.SEND_BATCH * 2 + 500)]
    calls: list[int] = []

    def batch(chunk: list[StartMessage]) -> None:
        calls.append(len(chunk))
        if len(calls) == 2:  # the second batch times out on a saturated broker
            raise BROKER_DOWN

    sent, failed, aside = _send_all(messages, send=lambda _: pytest.fail("one by one"), send_batch=batch)
    assert calls == [dispatch.SEND_BATCH, dispatch.SEND_BATCH]  # the third is not tried
    assert sent == [m.match_id for m in messages[: dispatch.SEND_BATCH]]
    assert failed == [m.match_id for m in messages[dispatch.SEND_BATCH :]] and aside == []


def test_send_all_sends_only_the_batch_holding_a_bad_message_one_by_one() -> None:
    messages = [StartMessage(f"m{n}", f"id{n}") for n in range(dispatch.SEND_BATCH + 2)]
    sender = Sent(refuse={"m1"})  # in the first batch
    sent, failed, aside = _send_all(messages, send=sender, send_batch=sender.batch)
    assert failed == ["m1"] and [a.item for a in aside] == ["m1"]
    assert sent == [m.match_id for m in messages if m.match_id != "m1"]
    assert [m.match_id for m in sender.messages] == sent  # the second batch went whole, once


def test_overlapping_ticks_turn_the_collector_back_on_only_after_the_last() -> None:
    import gc

    assert gc.isenabled()
    with cycle_collection_paused():
        with cycle_collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


# -- clean-up's decisions ---------------------------------------------------------------------


def closed_row(match_id: str, token: str, age: float) -> ClosedRow:
    return ClosedRow(
        record_id=token,
        match_id=match_id,
        heartbeat_at=datetime(2024, 5, 21, tzinfo=UTC),
        heartbeat_age_seconds=age,
    )


def test_only_a_silent_holders_lock_is_released(store: MemoryCoordinationStore, settings) -> None:
    silent, maybe_alive = match_ids(2)
    store.locks.start_lock(silent).acquire(token="r1")
    store.locks.start_lock(maybe_alive).acquire(token="r2")
    stale = settings.listener_heartbeat_stale_seconds
    rows = [closed_row(silent, "r1", stale + 1), closed_row(maybe_alive, "r2", stale - 1)]
    assert cleanup.release_dead_holders_locks(rows, settings=settings, coordination=store) == 1
    assert store.locks.start_lock_holders([silent, maybe_alive]) == {maybe_alive: "r2"}


def test_a_dead_runs_lock_a_successor_took_is_left_alone(store: MemoryCoordinationStore, settings) -> None:
    (m,) = match_ids(1)
    store.locks.start_lock(m).acquire(token="successor")
    row = closed_row(m, "dead", settings.listener_heartbeat_stale_seconds + 1)
    assert cleanup.release_dead_holders_locks([row], settings=settings, coordination=store) == 0
    assert store.locks.start_lock_holder(m) == "successor"


def test_after_abandon_clears_barriers_only_of_matches_with_no_active_row(
    store: MemoryCoordinationStore, settings, monkeypatch
) -> None:
    alone, sibling = match_ids(2)
    for m in (alone, sibling):
        store.barriers.claim_pending(m)
        store.barriers.record_failed_attempt(m)
    monkeypatch.setattr(
        cleanup.rows, "matches_with_active_rows", lambda matches, **_: {sibling} & set(matches)
    )
    rows = [closed_row(alone, "r1", 1.0), closed_row(sibling, "r2", 1.0)]
    assert cleanup.after_abandon(rows, settings=settings, coordination=store) == {alone}
    assert store.barriers.counters([alone, sibling]) == [(0, False, False), (1, False, True)]


def test_after_abandon_of_nothing_does_nothing(store: MemoryCoordinationStore, settings) -> None:
    store.down = True
    assert cleanup.after_abandon([], settings=settings, coordination=store) == set()


def test_a_pending_key_no_queued_start_can_clear_is_reclaimed(
    store: MemoryCoordinationStore, monkeypatch
) -> None:
    forgotten, consumed, queued, locked = match_ids(4)
    for m in (forgotten, consumed, queued, locked):
        store.barriers.claim_pending(m)
    store.locks.start_lock(locked).acquire(token="live")
    store.barriers.consume_message("msg-consumed")
    stored = {forgotten: None, consumed: "msg-consumed", queued: "msg-queued"}
    monkeypatch.setattr(cleanup, "stored_message_ids", lambda ids: {m: stored.get(m) for m in ids})
    assert sorted(cleanup.reclaim_stale_pending(coordination=store)) == sorted([forgotten, consumed])
    assert [store.barriers.is_pending(m) for m in (forgotten, consumed, queued, locked)] == [
        False,
        False,
        True,
        True,
    ]


def test_the_reaper_judges_nothing_until_the_epoch_is_older_than_a_lease(
    store: MemoryCoordinationStore, settings, clock: ManualClock, monkeypatch
) -> None:
    monkeypatch.setattr(cleanup.rows, "open_worker_leases", lambda match_ids=None: {"dead-lease"})
    abandoned: list[set[str]] = []

    def abandon(leases: set[str], **_: Any) -> list[ClosedRow]:
        abandoned.append(set(leases))
        return []

    monkeypatch.setattr(cleanup.rows, "abandon_rows_of_dead_workers", abandon)
    assert cleanup.reap_dead_workers(settings=settings, coordination=store) == []  # no epoch yet
    store.locks.renew_worker_lease("live-lease", known_epoch="", new_epoch_id="e", ttl_seconds=3600)
    assert cleanup.reap_dead_workers(settings=settings, coordination=store) == []  # epoch too young
    assert abandoned == []
    clock.advance(settings.listener_worker_lease_seconds * 1.25 + 2)
    dead: list[str] = []
    cleanup.reap_dead_workers(settings=settings, coordination=store, dead_leases=dead)
    assert abandoned == [{"dead-lease"}] and dead == ["dead-lease"]


def test_the_reaper_takes_over_a_worker_whose_liveness_signal_stayed_gone_for_the_grace(
    store: MemoryCoordinationStore, settings, clock: ManualClock, monkeypatch
) -> None:
    leases = {"dead", "dropped", "alive"}
    monkeypatch.setattr(cleanup.rows, "open_worker_leases", lambda match_ids=None: set(leases))
    abandoned: list[tuple[set[str], str]] = []

    def abandon(leases: set[str], *, reason: str = "worker lease expired", **_: Any) -> list[ClosedRow]:
        abandoned.append((set(leases), reason))
        return []

    monkeypatch.setattr(cleanup.rows, "abandon_rows_of_dead_workers", abandon)
    for lease in leases:
        store.locks.renew_worker_lease(lease, known_epoch="", new_epoch_id="e", ttl_seconds=3600)
    clock.advance(settings.listener_worker_lease_seconds * 1.25 + 2)
    held = {lease: store.locks.liveness_subscription(lease) for lease in leases}
    assert cleanup.reap_dead_workers(settings=settings, coordination=store) == [] and abandoned == []
    held["dead"].close()  # its process ended
    held["dropped"].kill()  # its connection was dropped: the worker subscribes again within the grace
    cleanup.reap_dead_workers(settings=settings, coordination=store)
    assert abandoned == []  # the grace has not passed: a dropped connection is not a death
    held["dropped"] = store.locks.liveness_subscription("dropped")
    clock.advance(settings.listener_liveness_grace_seconds)
    dead: list[str] = []
    cleanup.reap_dead_workers(settings=settings, coordination=store, dead_leases=dead)
    assert abandoned == [({"dead"}, takeover.WORKER_DIED)]
    assert dead == ["dead"]  # what it fetched and never ran goes back on the queue (actors.fetched_starts)


def test_one_dropped_liveness_connection_keeps_the_signal_held_and_makes_it_unsteady_for_a_while(
    store: MemoryCoordinationStore,
) -> None:
    lease = WorkerLease(locks=store.locks, ttl_seconds=8, fence_margin_seconds=3)
    lease.renew()
    signal = LivenessSignal(coordination=store, lease=lease, grace_seconds=0.05)
    signal.start()
    try:
        wait_for(lambda: len(store.signals) == 2, timeout=5, what="both connections subscribed")
        assert signal.steady_for() == float("inf")  # a worker that just booted: nothing ever dropped
        store.signals[0].kill()  # Redis dropped one connection: the other one holds the signal
        assert signal.held()
        wait_for(lambda: len(store.signals) == 2, timeout=5, what="the dropped one subscribed again")
        wait_for(lambda: signal.steady_for() < float("inf"), timeout=5, what="the drop noticed")
        assert signal.steady_for() < liveness.UNSTEADY_GRACE_SECONDS  # its reaper judges with the long grace
        assert not signal.must_fence(time.monotonic() + 10)
    finally:
        signal.stop()


def test_a_worker_whose_signal_cannot_be_re_established_while_redis_answers_fences_itself(
    store: MemoryCoordinationStore, monkeypatch
) -> None:
    lease = WorkerLease(locks=store.locks, ttl_seconds=8, fence_margin_seconds=3)
    lease.renew()
    signal = LivenessSignal(coordination=store, lease=lease, grace_seconds=0.05)
    signal.start()
    try:
        wait_for(lambda: signal.steady_for() > 0, timeout=5, what="the signal held on every connection")

        def refused(lease_id: str, **_: object) -> None:
            raise RedisUnavailable(
                service="Redis", setting="REDIS_URL", address="memory://", reason="refused"
            )

        monkeypatch.setattr(store.locks, "liveness_subscription", refused)
        for held in list(store.signals):  # Redis dropped both connections; subscribing again fails now
            held.kill()
        wait_for(lambda: not signal.held(), timeout=5, what="the drop noticed")
        assert not signal.must_fence(time.monotonic() + 10)  # Redis answered nobody since: no fence here
        lease.renew()  # Redis answers again: peers can see the signal gone
        seen = time.monotonic()
        assert not signal.must_fence(seen)  # the grace to subscribe again starts now
        assert signal.must_fence(seen + 0.1)  # past the grace (seen + 0.05 - seen may round below 0.05)
    finally:
        signal.stop()


# -- the process's listener services: checks, reaping, lost leases, graceful hand-offs --------


class Run:
    """A stand-in RunHandle: a match's run that records the stop it was asked for."""

    def __init__(self, match_id: str, cause: Any = None, *, with_row: bool = False) -> None:
        self.ctx = SimpleNamespace(match_id=match_id)
        self.cause = cause
        self.stops: list[Any] = []
        self.handed_over = 0
        # A run with a row hands its row and lock over to a waiting successor; one without is stopped.
        self.hand_over = self._hand_over if with_row else None

    def _hand_over(self) -> None:
        self.handed_over += 1

    def request_stop(self, cause: Any, *, grace_seconds: float) -> bool:
        if self.cause is None:
            self.cause = cause
        self.stops.append(cause)
        return True


def services_on(store: MemoryCoordinationStore, settings, **kwargs: Any) -> ListenerServices:
    return ListenerServices(settings=settings, coordination=store, **kwargs)


def test_a_heartbeat_that_could_outlive_the_start_lock_is_refused(
    store: MemoryCoordinationStore, lsettings
) -> None:
    bad = lsettings.model_copy(update={"listener_heartbeat_interval_seconds": store.stale_seconds})
    with pytest.raises(ConfigurationError, match="LISTENER_HEARTBEAT_STALE_SECONDS"):
        services_on(store, bad)


def test_a_worker_lease_too_short_for_its_renewals_is_refused(
    store: MemoryCoordinationStore, lsettings
) -> None:
    bad = lsettings.model_copy(update={"listener_worker_lease_seconds": 0.4})
    with pytest.raises(ConfigurationError, match="LISTENER_WORKER_LEASE_SECONDS"):
        services_on(store, bad)


def test_the_reaper_restarts_at_once_the_matches_it_freed(store: MemoryCoordinationStore, lsettings) -> None:
    restarted: list[list[str]] = []
    svc = services_on(store, lsettings, reap=lambda: ["m1", "m2"], redispatch=restarted.append)
    svc.reap_dead()
    assert restarted == [["m1", "m2"]]
    svc.shutting_down = True
    svc.reap_dead()
    assert restarted == [["m1", "m2"]]  # a worker shutting down reaps nothing


def test_a_reaper_step_a_service_failed_waits_for_the_next_one(
    store: MemoryCoordinationStore, lsettings
) -> None:
    def reap() -> list[str]:
        raise RedisUnavailable(service="Redis", setting="REDIS_URL", address="x", reason="down")

    restarted: list[list[str]] = []
    services_on(store, lsettings, reap=reap, redispatch=restarted.append).reap_dead()
    assert restarted == []


def test_a_lost_lease_fences_every_run_under_it_and_only_those(
    store: MemoryCoordinationStore, lsettings, clock: ManualClock
) -> None:
    svc = services_on(store, lsettings)
    lease_id = svc.lease.renew().lease_id
    lost: list[str] = []
    under, other = dry_run("m1", "t1", lost, lease_id=lease_id), dry_run("m2", "t2", [], lease_id="another")
    svc.heartbeat._regs.add(under)
    svc.heartbeat._regs.add(other)
    clock.advance(lsettings.listener_worker_lease_seconds + 1)  # the key expired: this process was paused
    svc.keep_lease()
    assert (under.fenced, other.fenced, lost) == (True, False, [LEASE_EXPIRED])


def test_a_hand_off_that_fails_is_left_to_the_next_dispatch(
    store: MemoryCoordinationStore, lsettings, caplog: pytest.LogCaptureFixture
) -> None:
    tried: list[list[str]] = []

    def redispatch(ids: list[str]) -> None:
        tried.append(ids)
        raise RuntimeError("broker bug")

    services_on(store, lsettings, redispatch=redispatch).hand_off("m1")  # does not raise
    assert tried == [["m1"]]
    # Nothing claims the match, so the next dispatch starts it; the failure is logged with the match.
    assert not store.barriers.is_pending("m1") and store.barriers.pending_match_ids() == []
    [record] = [r for r in caplog.records if "m1" in r.getMessage()]
    assert record.levelname == "ERROR" and "next dispatch" in record.getMessage()


def test_a_shutdown_without_hand_over_stops_every_run_at_once(
    store: MemoryCoordinationStore, lsettings
) -> None:
    svc = services_on(store, lsettings)
    runs = [Run("m1"), Run("m2")]
    for run in runs:
        svc.add(run)
    assert svc.shutdown_all() == 2
    assert [r.stops for r in runs] == [[worker_shutdown()], [worker_shutdown()]]


def handoff_settings(lsettings, *, bound: float):
    return lsettings.model_copy(
        update={"listener_handoff_seconds": bound, "listener_handoff_poll_seconds": 0.01}
    )


def test_a_shutdown_stops_each_run_as_soon_as_its_successor_waits(
    store: MemoryCoordinationStore, lsettings
) -> None:
    store.stops.announce_handover("m1", ttl_seconds=60)  # left from an older hand-off: cleared first
    handed: list[list[str]] = []

    def hand_over(ids: list[str]) -> None:
        handed.append(ids)
        for match_id in ids:  # each successor took its place in the queue and waits for the lock
            store.stops.announce_handover(match_id, ttl_seconds=60)

    svc = services_on(store, handoff_settings(lsettings, bound=60.0), hand_over=hand_over)
    runs = [Run("m1"), Run("m2"), Run("m3", cause=worker_shutdown())]
    for run in runs:
        svc.add(run)
    svc.shutdown_all()
    wait_for(lambda: runs[0].stops and runs[1].stops, timeout=30, what="both runs stopped")
    assert handed == [["m1", "m2"]]  # a run already told to stop gets no successor
    assert [r.stops for r in runs] == [[worker_shutdown(successor_waiting=True)]] * 2 + [[]]


def test_a_shutdown_hands_a_run_over_and_stops_it_only_at_its_successors_first_live_byte(
    store: MemoryCoordinationStore, lsettings
) -> None:
    store.stops.mark_live("m1", ttl_seconds=60)  # left from an older run: cleared first

    def hand_over(ids: list[str]) -> None:
        for match_id in ids:
            store.stops.announce_handover(match_id, ttl_seconds=60)

    svc = services_on(store, handoff_settings(lsettings, bound=60.0), hand_over=hand_over)
    run = Run("m1", with_row=True)
    svc.add(run)
    svc.shutdown_all()
    wait_for(lambda: run.handed_over == 1, timeout=30, what="the row and lock handed over")
    assert run.stops == []  # still streaming: the successor is not live yet
    store.stops.mark_live("m1", ttl_seconds=60)  # the successor's first live byte
    wait_for(lambda: run.stops, timeout=30, what="the stop at the successor's first live byte")
    assert run.stops == [worker_shutdown(successor_waiting=True)] and run.handed_over == 1


def test_a_run_handed_over_stops_at_the_bound_when_its_successor_is_never_live(
    store: MemoryCoordinationStore, lsettings
) -> None:
    svc = services_on(
        store,
        handoff_settings(lsettings, bound=0.2),
        hand_over=lambda ids: [store.stops.announce_handover(m, ttl_seconds=60) for m in ids],
    )
    run = Run("m1", with_row=True)
    svc.add(run)
    svc.shutdown_all()
    wait_for(lambda: run.stops, timeout=30, what="the stop at the bound")
    # Then handed off: a successor that said it waits may have died before its row (nothing else
    # would start the match before the next dispatch tick); the dispatch skips one that runs.
    assert run.handed_over == 1 and run.stops == [worker_shutdown()]


def test_a_shutdown_stops_a_run_whose_successor_never_waits_at_the_bound(
    store: MemoryCoordinationStore, lsettings
) -> None:
    store.stops.announce_handover("m1", ttl_seconds=60)  # an older hand-off's mark does not count
    svc = services_on(store, handoff_settings(lsettings, bound=0.2), hand_over=lambda ids: None)
    run = Run("m1")
    svc.add(run)
    svc.shutdown_all()
    wait_for(lambda: run.stops, timeout=30, what="the stop at the bound")
    assert run.stops == [worker_shutdown()]  # then handed off: no successor waits


def test_a_hand_over_that_fails_stops_every_run_at_once(store: MemoryCoordinationStore, lsettings) -> None:
    def hand_over(ids: list[str]) -> None:
        raise RuntimeError("could not queue the successors")

    svc = services_on(
        store, lsettings.model_copy(update={"listener_handoff_seconds": 60.0}), hand_over=hand_over
    )
    run = Run("m1")
    svc.add(run)
    svc.shutdown_all()
    wait_for(lambda: run.stops == [worker_shutdown()], timeout=10, what="the stop without a successor")


def test_in_develop_a_shutdown_hands_over_test_clones_only(store: MemoryCoordinationStore, lsettings) -> None:
    """Develop is test clones only: a live match's run gets no successor; it is stopped at once."""
    from config.settings import AppEnv

    handed: list[list[str]] = []

    def hand_over(ids: list[str]) -> None:
        handed.append(ids)
        for match_id in ids:
            store.stops.announce_handover(match_id, ttl_seconds=60)

    develop = handoff_settings(lsettings, bound=60.0).model_copy(update={"app_env": AppEnv.DEVELOP})
    svc = services_on(store, develop, hand_over=hand_over)
    live, clone = Run("live"), Run("clone")
    live.ctx.is_test, clone.ctx.is_test = False, True
    svc.add(live)
    svc.add(clone)
    svc.shutdown_all()
    wait_for(lambda: live.stops and clone.stops, timeout=30, what="both runs stopped")
    assert handed == [["clone"]]
    assert live.stops == [worker_shutdown()]  # its hand-off's dispatch skips it too (develop)
    assert clone.stops == [worker_shutdown(successor_waiting=True)]


@pytest.mark.parametrize("as_shipped", [True, False])
def test_the_heartbeat_takes_a_slow_beats_time_from_its_wait_the_other_pollers_do_not(
    store: MemoryCoordinationStore, monkeypatch: pytest.MonkeyPatch, as_shipped: bool
) -> None:
    """Each beat "takes" more than the interval on ``config.periodic``'s clock: the heartbeat
    as shipped (``FIXED_RATE``) beats again at once; made fixed-delay, as the other pollers are, it
    waits a whole interval (the control: the test tells the two apart)."""
    import config.periodic

    periodic_clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(config.periodic, "time", SimpleNamespace(monotonic=lambda: periodic_clock.now))
    if not as_shipped:
        monkeypatch.setattr(HeartbeatService, "FIXED_RATE", False)
    hour = 3600.0
    beats = threading.Semaphore(0)
    extend = store.locks.extend_start_locks

    def slow_extend(holders: Any, *, ttl_seconds: float) -> list[bool]:
        periodic_clock.now += hour + 1
        beats.release()
        return extend(holders, ttl_seconds=ttl_seconds)

    monkeypatch.setattr(store.locks, "extend_start_locks", slow_extend)
    service = HeartbeatService(
        coordination=store, interval_seconds=hour, lock_ttl_seconds=2 * hour, grace_seconds=2
    )
    (match_id,) = match_ids(1)
    store.locks.start_lock(match_id).acquire(token="t")
    service.register(dry_run(match_id, "t", []))
    try:
        service.wake()  # the first beat now, not in an hour
        assert beats.acquire(timeout=10)
        if as_shipped:
            assert beats.acquire(timeout=10) and beats.acquire(timeout=10)
        else:
            assert not beats.acquire(timeout=0.5)
    finally:
        service.stop()
