"""One contract for the coordination store: every test runs on the real CoordinationStore and on the fake.

The fake (tests/fakes/coordination.py) lets the lifecycle's decisions be tested without Redis; this
file keeps it honest. The ``redis`` run of each test reaches the shared Redis (marked
``services``: the normal tier); the ``memory`` run is in the fast tier. Time passes on Redis by
waiting (short TTLs, ``wait_for``) and on the fake by moving its clock.
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from config.errors import LockNotOwned, RedisUnavailable
from models.coordination import CoordinationStore, LeaseState, connect_redis
from tests.fakes.coordination import ManualClock, MemoryCoordinationStore
from tests.waiting import wait_for

#: Thresholds of the stores under contract: long enough never to lapse by accident, except those
#: a test shortens to watch a key expire.
THRESHOLDS = {
    "stale_seconds": 60.0,
    "active_max_age_seconds": 3600.0,
    "attempts_ttl_seconds": 3600.0,
    "attempt_cap": 3,
    "coordination_lock_seconds": 60.0,
}


@dataclass
class Store:
    """A store under contract and the test's levers on it."""

    barriers: Any  # CoordinationStore or MemoryCoordinationStore
    ttl: Callable[[str], float | None]  # seconds a key has left (None: no TTL or no key)
    forget_everything: Callable[[], None]  # Redis restarted empty
    elapse: Callable[[float, Callable[[], Any]], None]  # let ``seconds`` pass; the condition then holds


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.services)])
def make_store(request: pytest.FixtureRequest) -> Iterator[Callable[..., Store]]:
    """``make_store(**thresholds)``: a store of the parametrized kind (``THRESHOLDS`` by default)."""
    if request.param == "memory":
        clock = ManualClock()

        def memory(**overrides: Any) -> Store:
            fake = MemoryCoordinationStore(
                prefix="kickofftest:contract:", clock=clock, **{**THRESHOLDS, **overrides}
            )

            def elapse(seconds: float, condition: Callable[[], Any]) -> None:
                clock.advance(seconds + 0.01)
                assert condition()

            return Store(fake, fake.ttl, fake.forget_everything, elapse)

        yield memory
        return
    settings = request.getfixturevalue("settings")
    client = connect_redis(settings.redis_url)
    prefix = f"{settings.redis_key_prefix}contract:{uuid.uuid4().hex[:8]}:"

    def forget() -> None:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)

    def ttl(key: str) -> float | None:
        left = client.pttl(key)
        return None if left < 0 else left / 1000

    def elapse(seconds: float, condition: Callable[[], Any]) -> None:
        wait_for(condition, timeout=seconds + 10, what="the key's expiry")

    def real(**overrides: Any) -> Store:
        barriers = CoordinationStore(
            client, prefix=prefix, url=settings.redis_url, **{**THRESHOLDS, **overrides}
        )
        return Store(barriers, ttl, forget, elapse)

    yield real
    forget()


@pytest.fixture
def store(make_store: Callable[..., Store]) -> Store:
    return make_store()


def ids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


# -- the fake has the real store's shape --------------------------------------------------


def _public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name != "from_settings"
    }


def test_the_fake_has_every_public_method_of_barriers_with_the_same_parameters() -> None:
    real, fake = _public_methods(CoordinationStore), _public_methods(MemoryCoordinationStore)
    assert real.keys() <= fake.keys()
    for name, signature in real.items():
        assert list(fake[name].parameters) == list(signature.parameters), name


def test_the_fake_names_every_key_as_barriers_does() -> None:
    real = CoordinationStore(connect_redis("redis://127.0.0.1:1/0"), prefix="p:", url="redis://127.0.0.1:1/0")
    fake = MemoryCoordinationStore(prefix="p:")
    key_names = [
        name
        for name in dir(CoordinationStore)
        if name.endswith("_key") and name not in ("epoch_key", "tick_key")
    ]
    assert len(key_names) >= 9
    for name in key_names:
        assert getattr(fake, name)("m1") == getattr(real, name)("m1"), name
    assert (fake.epoch_key, fake.stop_channel) == (real.epoch_key, real.stop_channel)
    assert fake.tick_key("e", "s") == real.tick_key("e", "s")


def test_the_fake_takes_its_thresholds_from_settings_as_barriers_does(settings) -> None:
    tuned = settings.model_copy(
        update={"listener_heartbeat_stale_seconds": 42.0, "listener_start_attempt_cap": 4}
    )
    real = CoordinationStore.from_settings(tuned, client=connect_redis("redis://127.0.0.1:1/0"))
    fake = MemoryCoordinationStore.from_settings(tuned)
    for attr in THRESHOLDS:
        assert getattr(fake, attr) == getattr(real, attr), attr
    assert fake.prefix == real.prefix


# -- pending starts --------------------------------------------------------------------------


def test_a_pending_key_is_claimed_once_until_cleared(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    assert b.claim_pending(m) is True
    assert b.claim_pending(m) is False
    assert b.is_pending(m)
    b.clear_pending(m)
    assert not b.is_pending(m)
    assert b.claim_pending(m) is True


def test_a_pending_key_lives_for_the_active_max_age(store: Store) -> None:
    (m,) = ids(1)
    store.barriers.claim_pending(m)
    left = store.ttl(store.barriers.pending_key(m))
    assert left is not None and 3595 < left <= 3600


def test_a_pending_key_expires_after_the_active_max_age(make_store: Callable[..., Store]) -> None:
    store = make_store(active_max_age_seconds=1.0)
    (m,) = ids(1)
    store.barriers.claim_pending(m)
    store.elapse(1.0, lambda: not store.barriers.is_pending(m))
    assert store.barriers.claim_pending(m) is True


def test_claiming_many_pending_keys_claims_only_the_free_ones(store: Store) -> None:
    b = store.barriers
    a, taken, c = ids(3)
    b.claim_pending(taken)
    assert b.claim_pending_many([a, taken, c]) == [True, False, True]
    assert b.claim_pending_many([a, c]) == [False, False]
    assert b.claim_pending_many([]) == []


def test_clearing_many_pending_keys_and_none(store: Store) -> None:
    b = store.barriers
    a, c = ids(2)
    b.claim_pending_many([a, c])
    b.clear_pending()
    assert b.is_pending(a) and b.is_pending(c)
    b.clear_pending(a, c)
    assert not b.is_pending(a) and not b.is_pending(c)


def test_a_pending_key_is_cleared_unless_its_start_lock_is_held(store: Store) -> None:
    b = store.barriers
    free, started, absent = ids(3)
    b.claim_pending_many([free, started])
    assert b.start_lock(started).acquire()
    assert b.clear_pending_unless_started(free) is True
    assert b.clear_pending_unless_started(started) is False
    assert b.clear_pending_unless_started(absent) is False
    assert not b.is_pending(free) and b.is_pending(started)


def test_pending_match_ids_lists_match_ids_only(store: Store) -> None:
    b = store.barriers
    a, c = ids(2)
    b.claim_pending(a)
    b.claim_pending(c)
    b.claim_pending("not-a-uuid")
    assert sorted(b.pending_match_ids()) == sorted([a, c])


def test_pending_without_lock_leaves_out_matches_whose_start_lock_is_held(store: Store) -> None:
    b = store.barriers
    free, locked, idle = ids(3)
    b.claim_pending_many([free, locked])
    assert b.start_lock(locked).acquire()
    assert b.pending_without_lock() == [free]
    assert b.pending_without_lock([free, locked, idle]) == [free]
    assert b.pending_without_lock([]) == []


# -- attempts -------------------------------------------------------------------------------


def test_failed_attempts_count_up_and_exhaust_at_the_cap(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    assert b.attempts(m) == 0
    assert [b.record_failed_attempt(m) for _ in range(2)] == [1, 2]
    assert not b.is_exhausted(m)
    assert b.record_failed_attempt(m) == 3
    assert b.is_exhausted(m)
    assert b.attempts(m) == 3


def test_attempts_and_the_exhausted_flag_live_for_the_attempts_ttl(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    for _ in range(3):
        b.record_failed_attempt(m)
    for key in (b.attempts_key(m), b.exhausted_key(m)):
        left = store.ttl(key)
        assert left is not None and 3595 < left <= 3600


def test_failed_attempts_are_forgotten_after_their_ttl(make_store: Callable[..., Store]) -> None:
    store = make_store(attempts_ttl_seconds=1.0, attempt_cap=1)
    b = store.barriers
    (m,) = ids(1)
    b.record_failed_attempt(m)
    assert b.is_exhausted(m)
    store.elapse(1.0, lambda: b.attempts(m) == 0 and not b.is_exhausted(m))


def test_exhausted_among_and_counters_read_many_matches(store: Store) -> None:
    b = store.barriers
    spent, tried, queued = ids(3)
    for _ in range(3):
        b.record_failed_attempt(spent)
    b.record_failed_attempt(tried)
    b.claim_pending(queued)
    assert b.exhausted_among([spent, tried, queued]) == {spent}
    assert b.exhausted_among([]) == set()
    assert b.counters([spent, tried, queued]) == [(3, True, False), (1, False, False), (0, False, True)]
    assert b.counters([]) == []


def test_matches_with_keys_finds_every_family_but_locks(store: Store) -> None:
    b = store.barriers
    pending, tried, stopped, locked = ids(4)
    b.claim_pending(pending)
    b.record_failed_attempt(tried)
    b.set_stop_flag(stopped)
    b.start_lock(locked).acquire()
    assert b.matches_with_keys() == {pending, tried, stopped}


# -- locks ----------------------------------------------------------------------------------


def test_a_start_lock_has_one_holder(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    first, second = b.start_lock(m), b.start_lock(m)
    assert first.acquire(token="run-1")
    assert not second.acquire(token="run-2")
    assert first.owned() and not second.owned()
    assert second.locked()
    assert b.start_lock_holder(m) == "run-1"


def test_a_lock_is_released_and_extended_only_by_its_holder(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    holder, other = b.start_lock(m), b.start_lock(m)
    holder.acquire(token="run-1")
    with pytest.raises(LockNotOwned):
        other.release()
    with pytest.raises(LockNotOwned):
        other.extend()
    other.adopt("run-2")
    with pytest.raises(LockNotOwned):
        other.release()
    assert b.start_lock_holder(m) == "run-1"
    holder.release()
    assert b.start_lock_holder(m) is None
    with pytest.raises(LockNotOwned):
        holder.release()


def test_a_process_that_knows_the_token_acts_as_the_holder(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    b.start_lock(m).acquire(token="run-1")
    adopted = b.start_lock(m).adopt("run-1")
    assert adopted.token == "run-1" and adopted.owned()
    adopted.extend()
    adopted.release()
    assert not b.start_lock(m).locked()


def test_a_start_lock_lives_for_the_stale_threshold_and_is_extended_to_it(
    make_store: Callable[..., Store],
) -> None:
    store = make_store(stale_seconds=30.0)
    lock = store.barriers.start_lock(ids(1)[0])
    lock.acquire()
    left = store.ttl(lock.key)
    assert left is not None and 29 < left <= 30
    lock.extend()
    left = store.ttl(lock.key)
    assert left is not None and 29 < left <= 30


def test_an_expired_lock_is_free_and_its_old_holder_can_no_longer_extend_it(
    make_store: Callable[..., Store],
) -> None:
    store = make_store(stale_seconds=1.0)
    (m,) = ids(1)
    old = store.barriers.start_lock(m)
    old.acquire(token="old")
    store.elapse(1.0, lambda: not old.locked())
    assert store.barriers.start_lock(m).acquire(token="new")
    with pytest.raises(LockNotOwned):
        old.extend()
    assert store.barriers.start_lock_holder(m) == "new"


def test_the_context_manager_takes_and_releases_only_its_own_lock(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    with b.start_lock(m) as took:
        assert took
        with b.start_lock(m) as second:
            assert not second
        assert b.start_lock(m).locked()
    assert not b.start_lock(m).locked()


def test_an_acquired_lock_gets_a_token_of_its_own(store: Store) -> None:
    (m,) = ids(1)
    lock = store.barriers.start_lock(m)
    assert lock.token is None
    assert lock.acquire()
    assert lock.token and store.barriers.start_lock_holder(m) == lock.token


def test_start_lock_holders_leave_free_locks_out(store: Store) -> None:
    b = store.barriers
    held, free = ids(2)
    b.start_lock(held).acquire(token="t1")
    assert b.start_lock_holders([held, free]) == {held: "t1"}
    assert b.start_lock_holders([]) == {}


def test_dispatch_and_sweep_locks_are_one_each_and_apart(store: Store) -> None:
    b = store.barriers
    dispatch = b.dispatch_lock()
    assert dispatch.acquire()
    assert not b.dispatch_lock().acquire()
    sweep = b.sweep_lock()
    assert sweep.acquire()
    left = store.ttl(dispatch.key)
    assert left is not None and 59 < left <= 60
    dispatch.release()
    assert b.dispatch_lock().acquire()


def test_extending_many_start_locks_keeps_own_retakes_missing_and_spares_others(store: Store) -> None:
    b = store.barriers
    own, missing, others = ids(3)
    b.start_lock(own).acquire(token="a")
    b.start_lock(others).acquire(token="x")
    answers = b.extend_start_locks([(own, "a"), (missing, "b"), (others, "c")], ttl_seconds=20)
    assert answers == [True, True, False]
    assert b.start_lock_holders([own, missing, others]) == {own: "a", missing: "b", others: "x"}
    left = store.ttl(b.start_lock_key(missing))
    assert left is not None and 19 < left <= 20
    assert b.extend_start_locks([], ttl_seconds=20) == []


def test_a_dead_runs_lock_is_deleted_only_with_its_token(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    b.start_lock(m).acquire(token="dead")
    assert b.delete_start_lock_if_token(m, "someone-else") is False
    assert b.start_lock_holder(m) == "dead"
    assert b.delete_start_lock_if_token(m, "dead") is True
    assert b.start_lock_holder(m) is None
    assert b.delete_start_lock_if_token(m, "dead") is False


def test_a_fenced_runs_lock_and_pending_key_go_only_once_its_worker_lease_is_gone(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    b.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    b.start_lock(m).acquire(token="run-1")
    assert b.claim_pending(m)
    assert b.release_fenced_start_lock(m, "run-1", "w1") is False  # its worker still holds a lease
    assert b.release_fenced_start_lock(m, "run-2", "gone") is False  # another run's lock
    assert b.start_lock_holder(m) == "run-1" and b.is_pending(m)
    assert b.release_fenced_start_lock(m, "run-1", "gone") is True
    assert b.start_lock_holder(m) is None and not b.is_pending(m)


def test_an_orphan_restart_is_claimed_only_without_lock_or_pending_key_and_once_per_spacing(
    store: Store,
) -> None:
    b = store.barriers
    free, locked, pending = ids(3)
    b.start_lock(locked).acquire(token="run-1")
    assert b.claim_pending(pending)
    assert b.claim_orphan_restarts([free, locked, pending], every_seconds=1) == [free]
    assert b.claim_orphan_restarts([free], every_seconds=1) == []  # once per spacing
    assert b.claim_orphan_restarts([], every_seconds=1) == []
    left = store.ttl(b.orphan_restart_key(free))
    assert left is not None and 0 < left <= 1
    store.elapse(1.0, lambda: b.claim_orphan_restarts([free], every_seconds=1) == [free])


# -- hand-offs, stop flags, revoked messages ------------------------------------------------


def test_a_handover_is_announced_read_and_cleared(store: Store) -> None:
    b = store.barriers
    a, c = ids(2)
    b.announce_handover(a, ttl_seconds=30)
    assert b.handovers_ready([a, c]) == {a}
    b.clear_handovers([a, c])
    assert b.handovers_ready([a]) == set()
    b.clear_handovers([])


def test_a_handover_mark_expires(store: Store) -> None:
    (m,) = ids(1)
    store.barriers.announce_handover(m, ttl_seconds=0.5)
    left = store.ttl(store.barriers.handover_key(m))
    assert left is not None and 0 < left <= 0.5
    store.elapse(0.5, lambda: store.barriers.handovers_ready([m]) == set())


def test_a_stop_flag_is_set_read_and_cleared(store: Store) -> None:
    b = store.barriers
    a, c = ids(2)
    b.set_stop_flag(a, ttl_seconds=30)
    assert b.stop_flags_among([a, c]) == {a}
    left = store.ttl(b.stop_flag_key(a))
    assert left is not None and 29 < left <= 30
    b.clear_stop_flag(a)
    assert b.stop_flags_among([a]) == set()


def test_a_stop_flag_lives_at_least_a_second(store: Store) -> None:
    (m,) = ids(1)
    store.barriers.set_stop_flag(m, ttl_seconds=0.01)
    left = store.ttl(store.barriers.stop_flag_key(m))
    assert left is not None and 0.1 < left <= 1  # a whole second, not the 0.01 asked for


def test_a_stop_is_pushed_to_every_subscription(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    first, second = b.stop_subscription(), b.stop_subscription()
    try:
        assert b.next_stop_message(first, timeout=0.1) is None
        b.set_stop_flag(m)
        assert wait_for(lambda: b.next_stop_message(first, timeout=0.5)) == m
        assert wait_for(lambda: b.next_stop_message(second, timeout=0.5)) == m
    finally:
        first.close()
        second.close()


def test_a_revoked_message_is_remembered_and_cannot_be_consumed(store: Store) -> None:
    b = store.barriers
    assert not b.is_revoked("msg-1")
    b.revoke_message("msg-1")
    assert b.is_revoked("msg-1")
    assert b.consume_message("msg-1") is False
    left = store.ttl(b.revoked_key("msg-1"))
    assert left is not None and 3595 < left <= 3600


def test_a_message_is_consumed_once(store: Store) -> None:
    b = store.barriers
    assert b.consume_message("msg-2") is True
    assert b.consume_message("msg-2") is False
    assert b.consumed_among(["msg-2", "msg-3"]) == {"msg-2"}
    assert b.consumed_among([]) == set()


# -- worker leases ---------------------------------------------------------------------------


def test_a_new_lease_is_created_then_extended(store: Store) -> None:
    b = store.barriers
    state, epoch = b.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    assert state == 2 and epoch.startswith("e1:")
    again, same = b.renew_worker_lease("w1", known_epoch=epoch, new_epoch_id="e2", ttl_seconds=8)
    assert (again, same) == (1, epoch)
    left = store.ttl(b.worker_lease_key("w1"))
    assert left is not None and 7 < left <= 8


def test_an_expired_lease_under_the_same_epoch_is_fenced(store: Store) -> None:
    b = store.barriers
    _, epoch = b.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=0.3)
    store.elapse(0.3, lambda: b.live_worker_leases(["w1"])[0] == set())
    state, same = b.renew_worker_lease("w1", known_epoch=epoch, new_epoch_id="e2", ttl_seconds=8)
    assert (state, same) == (0, epoch)
    assert b.live_worker_leases(["w1"])[0] == set()


def test_a_lease_lost_with_redis_data_is_created_again_under_a_new_epoch(store: Store) -> None:
    b = store.barriers
    _, epoch = b.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    store.forget_everything()
    state, new_epoch = b.renew_worker_lease("w1", known_epoch=epoch, new_epoch_id="e2", ttl_seconds=8)
    assert state == 2 and new_epoch.startswith("e2:") and new_epoch != epoch


def test_live_worker_leases_and_the_age_of_the_epoch(store: Store) -> None:
    b = store.barriers
    assert b.live_worker_leases(["w1"]) == (set(), None)
    b.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    alive, age = b.live_worker_leases(["w1", "w2", "w1"])
    assert alive == {"w1"}
    assert age is not None and 0 <= age < 5


def test_a_lease_whose_liveness_signal_is_held_is_alive_and_one_whose_signal_ended_dies_after_the_grace(
    store: Store,
) -> None:
    b = store.barriers
    judge = functools.partial(b.judge_worker_leases, grace_seconds=0.3, ttl_seconds=8)
    assert judge(["w1"]).epoch_age is None
    b.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    b.renew_worker_lease("w2", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    signal = b.liveness_subscription("w1")
    try:
        judged = judge(["w1", "w2", "gone"])
        assert judged.states == {
            "w1": LeaseState.ALIVE,
            "w2": LeaseState.SIGNAL_LOST,
            "gone": LeaseState.LAPSED,
        }
        assert judged.epoch_age is not None and 0 <= judged.epoch_age < 5
        # w2 never held a signal: the first look started its grace, a look past it judges it dead
        store.elapse(0.3, lambda: judge(["w2"]).states["w2"] == LeaseState.DEAD)
        assert judge(["w1"]).states["w1"] == LeaseState.ALIVE
    finally:
        signal.close()
    assert judge(["w1"]).states["w1"] == LeaseState.SIGNAL_LOST  # its connection closed
    again = b.liveness_subscription("w1")  # re-established within the grace: alive, the grace forgotten
    try:
        assert judge(["w1"]).states["w1"] == LeaseState.ALIVE
        assert store.ttl(b.liveness_lost_key("w1")) is None
    finally:
        again.close()


def test_a_lease_without_a_liveness_signal_of_an_older_worker_is_judged_by_its_lease_alone(
    store: Store,
) -> None:
    b = store.barriers
    b.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    if isinstance(b, MemoryCoordinationStore):
        b._set(b.worker_lease_key("w1"), "1", ttl=8)
    else:
        b.client.set(b.worker_lease_key("w1"), "1", px=8000)
    judged = b.judge_worker_leases(["w1"], grace_seconds=0.0, ttl_seconds=8)
    assert judged.states == {"w1": LeaseState.ALIVE}


def test_holding_a_liveness_signal_raises_once_its_connection_is_dropped(store: Store) -> None:
    b = store.barriers
    signal = b.liveness_subscription("w1")
    try:
        b.hold_liveness(signal, timeout=0.01)
        if isinstance(b, MemoryCoordinationStore):
            signal.kill()
        else:
            name = b.liveness_client_name("w1")
            (held,) = [c["id"] for c in b.client.client_list() if c["name"] == name]
            b.client.client_kill_filter(_id=held)
        with pytest.raises(RedisUnavailable):
            b.hold_liveness(signal, timeout=2.0)
    finally:
        signal.close()


# -- scheduler ticks and bulk previews -------------------------------------------------------

AT = datetime(2024, 5, 21, 18, 0, 30, tzinfo=UTC)


def test_a_tick_slot_is_claimed_once_per_entry_and_minute(store: Store) -> None:
    b = store.barriers
    assert b.claim_tick("dispatch", AT, owner="s1", ttl_seconds=3600)
    assert not b.claim_tick("dispatch", AT + timedelta(seconds=20), owner="s2", ttl_seconds=3600)
    assert b.claim_tick("sweep", AT, owner="s2", ttl_seconds=3600)
    assert b.claim_tick("dispatch", AT + timedelta(minutes=1), owner="s2", ttl_seconds=3600)


def test_ticks_are_found_by_minute_and_the_newest_is_known(store: Store) -> None:
    b = store.barriers
    assert b.newest_tick_at() is None
    assert not b.any_tick_at(AT)
    b.claim_tick("dispatch", AT, owner="s1", ttl_seconds=3600)
    b.claim_tick("sweep", AT + timedelta(minutes=3), owner="s1", ttl_seconds=3600)
    assert b.any_tick_at(AT) and not b.any_tick_at(AT + timedelta(minutes=1))
    assert b.newest_tick_at() == datetime(2024, 5, 21, 18, 3, tzinfo=UTC)


def test_a_bulk_preview_is_taken_once(store: Store) -> None:
    b = store.barriers
    b.save_bulk_preview("d1", '{"action": "stop"}', ttl_seconds=300)
    left = store.ttl(b.bulk_preview_key("d1"))
    assert left is not None and 299 < left <= 300
    assert b.take_bulk_preview("d1") == '{"action": "stop"}'
    assert b.take_bulk_preview("d1") is None


def test_a_bulk_preview_expires(store: Store) -> None:
    b = store.barriers
    b.save_bulk_preview("d2", "{}", ttl_seconds=0.3)
    store.elapse(0.3, lambda: b.take_bulk_preview("d2") is None)


# -- clearing -------------------------------------------------------------------------------


def test_a_forced_start_clears_attempts_and_holds_the_pending_key(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    for _ in range(3):
        b.record_failed_attempt(m)
    b.claim_pending(m)
    b.retake_for_forced_start(m)
    assert (b.attempts(m), b.is_exhausted(m), b.is_pending(m)) == (0, False, True)
    assert b.claim_pending(m) is False


def test_clearing_start_barriers_never_touches_the_start_lock(store: Store) -> None:
    b = store.barriers
    (m,) = ids(1)
    b.claim_pending(m)
    b.record_failed_attempt(m)
    b.start_lock(m).acquire(token="live")
    b.clear_start_barriers(m)
    assert b.counters([m]) == [(0, False, False)]
    assert b.start_lock_holder(m) == "live"


def test_ping_answers(store: Store) -> None:
    assert store.barriers.ping() is None
