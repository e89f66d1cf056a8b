"""One contract for the coordination store: every test runs on the real CoordinationStore and on the fake.

The fake (tests/fakes/coordination/, split by concern as models/coordination/ is) lets the
lifecycle's decisions be tested without Redis; this file keeps it honest. The ``redis`` run of each
test reaches the shared Redis (marked ``services``: the normal tier); the ``memory`` run is in the
fast tier. Time passes on Redis by waiting (short TTLs, ``wait_for``) and on the fake by moving its
clock.
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
from models.coordination._redis import RedisConcern
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

    coordination: Any  # CoordinationStore or MemoryCoordinationStore
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
        coordination = CoordinationStore(
            client, prefix=prefix, url=settings.redis_url, **{**THRESHOLDS, **overrides}
        )
        return Store(coordination, ttl, forget, elapse)

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


#: The concern stores of a coordination store (its attributes), real and fake alike.
CONCERNS = ("barriers", "locks", "stops", "ticks", "previews")


def _stores() -> tuple[CoordinationStore, MemoryCoordinationStore]:
    real = CoordinationStore(connect_redis("redis://127.0.0.1:1/0"), prefix="p:", url="redis://127.0.0.1:1/0")
    return real, MemoryCoordinationStore(prefix="p:")


def test_the_fake_has_the_real_stores_concerns_in_modules_of_the_same_names() -> None:
    real, fake = _stores()
    assert {name for name, value in vars(real).items() if isinstance(value, RedisConcern)} == set(CONCERNS)
    for concern in CONCERNS:
        real_module = type(getattr(real, concern)).__module__.rsplit(".", 1)[1]
        assert type(getattr(fake, concern)).__module__.rsplit(".", 1)[1] == real_module, concern


def test_the_fake_has_every_public_method_of_each_concern_with_the_same_parameters() -> None:
    real, fake = _stores()
    assert _public_methods(CoordinationStore).keys() <= _public_methods(MemoryCoordinationStore).keys()
    seen: set[str] = set()
    for concern in CONCERNS:
        methods = _public_methods(type(getattr(real, concern)))
        fake_methods = _public_methods(type(getattr(fake, concern)))
        assert methods.keys() <= fake_methods.keys(), concern
        for name, signature in methods.items():
            assert list(fake_methods[name].parameters) == list(signature.parameters), f"{concern}.{name}"
        own = {name for name in vars(type(getattr(real, concern))) if not name.startswith("_")}
        assert not seen & own, f"{concern} repeats another concern's methods"
        seen |= own


def test_the_fake_names_every_key_as_the_real_store_does() -> None:
    real, fake = _stores()
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


def test_the_fake_takes_its_thresholds_from_settings_as_the_real_store_does(settings) -> None:
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
    b = store.coordination
    (m,) = ids(1)
    assert b.barriers.claim_pending(m) is True
    assert b.barriers.claim_pending(m) is False
    assert b.barriers.is_pending(m)
    b.barriers.clear_pending(m)
    assert not b.barriers.is_pending(m)
    assert b.barriers.claim_pending(m) is True


def test_a_pending_key_lives_for_the_active_max_age(store: Store) -> None:
    (m,) = ids(1)
    store.coordination.barriers.claim_pending(m)
    left = store.ttl(store.coordination.pending_key(m))
    assert left is not None and 3595 < left <= 3600


def test_a_pending_key_expires_after_the_active_max_age(make_store: Callable[..., Store]) -> None:
    store = make_store(active_max_age_seconds=1.0)
    (m,) = ids(1)
    store.coordination.barriers.claim_pending(m)
    store.elapse(1.0, lambda: not store.coordination.barriers.is_pending(m))
    assert store.coordination.barriers.claim_pending(m) is True


def test_claiming_many_pending_keys_claims_only_the_free_ones(store: Store) -> None:
    b = store.coordination
    a, taken, c = ids(3)
    b.barriers.claim_pending(taken)
    assert b.barriers.claim_pending_many([a, taken, c]) == [True, False, True]
    assert b.barriers.claim_pending_many([a, c]) == [False, False]
    assert b.barriers.claim_pending_many([]) == []


def test_clearing_many_pending_keys_and_none(store: Store) -> None:
    b = store.coordination
    a, c = ids(2)
    b.barriers.claim_pending_many([a, c])
    b.barriers.clear_pending()
    assert b.barriers.is_pending(a) and b.barriers.is_pending(c)
    b.barriers.clear_pending(a, c)
    assert not b.barriers.is_pending(a) and not b.barriers.is_pending(c)


def test_a_pending_key_is_cleared_unless_its_start_lock_is_held(store: Store) -> None:
    b = store.coordination
    free, started, absent = ids(3)
    b.barriers.claim_pending_many([free, started])
    assert b.locks.start_lock(started).acquire()
    assert b.barriers.clear_pending_unless_started(free) is True
    assert b.barriers.clear_pending_unless_started(started) is False
    assert b.barriers.clear_pending_unless_started(absent) is False
    assert not b.barriers.is_pending(free) and b.barriers.is_pending(started)


def test_pending_match_ids_lists_match_ids_only(store: Store) -> None:
    b = store.coordination
    a, c = ids(2)
    b.barriers.claim_pending(a)
    b.barriers.claim_pending(c)
    b.barriers.claim_pending("not-a-uuid")
    assert sorted(b.barriers.pending_match_ids()) == sorted([a, c])


def test_pending_without_lock_leaves_out_matches_whose_start_lock_is_held(store: Store) -> None:
    b = store.coordination
    free, locked, idle = ids(3)
    b.barriers.claim_pending_many([free, locked])
    assert b.locks.start_lock(locked).acquire()
    assert b.barriers.pending_without_lock() == [free]
    assert b.barriers.pending_without_lock([free, locked, idle]) == [free]
    assert b.barriers.pending_without_lock([]) == []


# -- attempts -------------------------------------------------------------------------------


def test_failed_attempts_count_up_and_exhaust_at_the_cap(store: Store) -> None:
    b = store.coordination
    (m,) = ids(1)
    assert b.barriers.attempts(m) == 0
    assert [b.barriers.record_failed_attempt(m) for _ in range(2)] == [1, 2]
    assert not b.barriers.is_exhausted(m)
    assert b.barriers.record_failed_attempt(m) == 3
    assert b.barriers.is_exhausted(m)
    assert b.barriers.attempts(m) == 3


def test_attempts_and_the_exhausted_flag_live_for_the_attempts_ttl(store: Store) -> None:
    b = store.coordination
    (m,) = ids(1)
    for _ in range(3):
        b.barriers.record_failed_attempt(m)
    for key in (b.attempts_key(m), b.exhausted_key(m)):
        left = store.ttl(key)
        assert left is not None and 3595 < left <= 3600


def test_failed_attempts_are_forgotten_after_their_ttl(make_store: Callable[..., Store]) -> None:
    store = make_store(attempts_ttl_seconds=1.0, attempt_cap=1)
    b = store.coordination
    (m,) = ids(1)
    b.barriers.record_failed_attempt(m)
    assert b.barriers.is_exhausted(m)
    store.elapse(1.0, lambda: b.barriers.attempts(m) == 0 and not b.barriers.is_exhausted(m))


def test_exhausted_among_and_counters_read_many_matches(store: Store) -> None:
    b = store.coordination
    spent, tried, queued = ids(3)
    for _ in range(3):
        b.barriers.record_failed_attempt(spent)
    b.barriers.record_failed_attempt(tried)
    b.barriers.claim_pending(queued)
    assert b.barriers.exhausted_among([spent, tried, queued]) == {spent}
    assert b.barriers.exhausted_among([]) == set()
    assert b.barriers.counters([spent, tried, queued]) == [
        (3, True, False),
        (1, False, False),
        (0, False, True),
    ]
    assert b.barriers.counters([]) == []


def test_matches_with_keys_finds_every_family_but_locks(store: Store) -> None:
    b = store.coordination
    pending, tried, stopped, locked = ids(4)
    b.barriers.claim_pending(pending)
    b.barriers.record_failed_attempt(tried)
    b.stops.set_stop_flag(stopped)
    b.locks.start_lock(locked).acquire()
    assert b.barriers.matches_with_keys() == {pending, tried, stopped}


# -- locks ----------------------------------------------------------------------------------


def test_a_start_lock_has_one_holder(store: Store) -> None:
    b = store.coordination
    (m,) = ids(1)
    first, second = b.locks.start_lock(m), b.locks.start_lock(m)
    assert first.acquire(token="run-1")
    assert not second.acquire(token="run-2")
    assert first.owned() and not second.owned()
    assert second.locked()
    assert b.locks.start_lock_holder(m) == "run-1"


def test_a_lock_is_released_and_extended_only_by_its_holder(store: Store) -> None:
    b = store.coordination
    (m,) = ids(1)
    holder, other = b.locks.start_lock(m), b.locks.start_lock(m)
    holder.acquire(token="run-1")
    with pytest.raises(LockNotOwned):
        other.release()
    with pytest.raises(LockNotOwned):
        other.extend()
    other.adopt("run-2")
    with pytest.raises(LockNotOwned):
        other.release()
    assert b.locks.start_lock_holder(m) == "run-1"
    holder.release()
    assert b.locks.start_lock_holder(m) is None
    with pytest.raises(LockNotOwned):
        holder.release()


def test_a_process_that_knows_the_token_acts_as_the_holder(store: Store) -> None:
    b = store.coordination
    (m,) = ids(1)
    b.locks.start_lock(m).acquire(token="run-1")
    adopted = b.locks.start_lock(m).adopt("run-1")
    assert adopted.token == "run-1" and adopted.owned()
    adopted.extend()
    adopted.release()
    assert not b.locks.start_lock(m).locked()


def test_a_start_lock_lives_for_the_stale_threshold_and_is_extended_to_it(
    make_store: Callable[..., Store],
) -> None:
    store = make_store(stale_seconds=30.0)
    lock = store.coordination.locks.start_lock(ids(1)[0])
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
    old = store.coordination.locks.start_lock(m)
    old.acquire(token="old")
    store.elapse(1.0, lambda: not old.locked())
    assert store.coordination.locks.start_lock(m).acquire(token="new")
    with pytest.raises(LockNotOwned):
        old.extend()
    assert store.coordination.locks.start_lock_holder(m) == "new"


def test_the_context_manager_takes_and_releases_only_its_own_lock(store: Store) -> None:
    b = store.coordination
    (m,) = ids(1)
    with b.locks.start_lock(m) as took:
        assert took
        with b.locks.start_lock(m) as second:
            assert not second
        assert b.locks.start_lock(m).locked()
    assert not b.locks.start_lock(m).locked()


def test_an_acquired_lock_gets_a_token_of_its_own(store: Store) -> None:
    (m,) = ids(1)
    lock = store.coordination.locks.start_lock(m)
    assert lock.token is None
    assert lock.acquire()
    assert lock.token and store.coordination.locks.start_lock_holder(m) == lock.token


def test_start_lock_holders_leave_free_locks_out(store: Store) -> None:
    b = store.coordination
    held, free = ids(2)
    b.locks.start_lock(held).acquire(token="t1")
    assert b.locks.start_lock_holders([held, free]) == {held: "t1"}
    assert b.locks.start_lock_holders([]) == {}


def test_dispatch_and_sweep_locks_are_one_each_and_apart(store: Store) -> None:
    b = store.coordination
    dispatch = b.locks.dispatch_lock()
    assert dispatch.acquire()
    assert not b.locks.dispatch_lock().acquire()
    sweep = b.locks.sweep_lock()
    assert sweep.acquire()
    left = store.ttl(dispatch.key)
    assert left is not None and 59 < left <= 60
    dispatch.release()
    assert b.locks.dispatch_lock().acquire()


def test_extending_many_start_locks_keeps_own_retakes_missing_and_spares_others(store: Store) -> None:
    b = store.coordination
    own, missing, others = ids(3)
    b.locks.start_lock(own).acquire(token="a")
    b.locks.start_lock(others).acquire(token="x")
    answers = b.locks.extend_start_locks([(own, "a"), (missing, "b"), (others, "c")], ttl_seconds=20)
    assert answers == [True, True, False]
    assert b.locks.start_lock_holders([own, missing, others]) == {own: "a", missing: "b", others: "x"}
    left = store.ttl(b.start_lock_key(missing))
    assert left is not None and 19 < left <= 20
    assert b.locks.extend_start_locks([], ttl_seconds=20) == []


def test_a_dead_runs_lock_is_deleted_only_with_its_token(store: Store) -> None:
    b = store.coordination
    (m,) = ids(1)
    b.locks.start_lock(m).acquire(token="dead")
    assert b.locks.delete_start_lock_if_token(m, "someone-else") is False
    assert b.locks.start_lock_holder(m) == "dead"
    assert b.locks.delete_start_lock_if_token(m, "dead") is True
    assert b.locks.start_lock_holder(m) is None
    assert b.locks.delete_start_lock_if_token(m, "dead") is False


def test_a_fenced_runs_lock_and_pending_key_go_only_once_its_worker_lease_is_gone(store: Store) -> None:
    b = store.coordination
    (m,) = ids(1)
    b.locks.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    b.locks.start_lock(m).acquire(token="run-1")
    assert b.barriers.claim_pending(m)
    assert b.locks.release_fenced_start_lock(m, "run-1", "w1") is False  # its worker still holds a lease
    assert b.locks.release_fenced_start_lock(m, "run-2", "gone") is False  # another run's lock
    assert b.locks.start_lock_holder(m) == "run-1" and b.barriers.is_pending(m)
    assert b.locks.release_fenced_start_lock(m, "run-1", "gone") is True
    assert b.locks.start_lock_holder(m) is None and not b.barriers.is_pending(m)


def test_the_starts_a_dead_workers_lease_took_are_released_only_where_they_still_hold_the_lock(
    store: Store,
) -> None:
    b = store.coordination
    held, handed, forgotten, other = ids(4)
    for m, token in ((held, "s1"), (handed, "s2"), (forgotten, "s3")):
        b.locks.start_lock(m).acquire(token=token)
        assert b.barriers.claim_pending(m)
        b.locks.note_start_taken("dead", m, token, ttl_seconds=60)
    b.locks.start_lock(other).acquire(token="s4")
    b.locks.note_start_taken("alive", other, "s4", ttl_seconds=60)
    b.locks.delete_start_lock_if_token(handed, "s2")
    b.locks.start_lock(handed).acquire(token="successor")  # the match started again meanwhile
    b.locks.forget_start_taken("dead", forgotten)  # its run let the lock go itself (and its row ended)
    assert b.locks.leases_to_judge() == ["alive", "dead"]
    assert b.locks.release_starts_taken(["dead", "never-noted"]) == [held]
    assert b.locks.leases_to_judge() == ["alive"]  # a released lease is no longer judged
    assert b.locks.start_lock_holder(held) is None and not b.barriers.is_pending(held)
    assert b.locks.start_lock_holder(handed) == "successor" and b.barriers.is_pending(handed)
    assert b.locks.start_lock_holder(forgotten) == "s3" and b.locks.start_lock_holder(other) == "s4"
    assert b.locks.release_starts_taken(["dead"]) == []  # forgotten with the release
    assert b.locks.release_starts_taken(["alive"]) == [other]


def test_a_lease_is_judged_from_its_first_liveness_signal_until_a_reaper_releases_it(store: Store) -> None:
    b = store.coordination
    assert b.locks.leases_to_judge() == []
    signal = b.locks.liveness_subscription("w1")
    try:
        assert b.locks.leases_to_judge() == ["w1"]
    finally:
        signal.close()
    assert b.locks.leases_to_judge() == ["w1"]  # a closed signal is a reaper's to judge
    assert b.locks.release_starts_taken(["w1"]) == []
    assert b.locks.leases_to_judge() == []


def test_an_orphan_restart_is_claimed_only_without_lock_or_pending_key_and_once_per_spacing(
    store: Store,
) -> None:
    b = store.coordination
    free, locked, pending = ids(3)
    b.locks.start_lock(locked).acquire(token="run-1")
    assert b.barriers.claim_pending(pending)
    assert b.locks.claim_orphan_restarts([free, locked, pending], every_seconds=1) == [free]
    assert b.locks.claim_orphan_restarts([free], every_seconds=1) == []  # once per spacing
    assert b.locks.claim_orphan_restarts([], every_seconds=1) == []
    left = store.ttl(b.orphan_restart_key(free))
    assert left is not None and 0 < left <= 1
    store.elapse(1.0, lambda: b.locks.claim_orphan_restarts([free], every_seconds=1) == [free])


# -- hand-offs, stop flags, revoked messages ------------------------------------------------


def test_a_handover_is_announced_read_and_cleared(store: Store) -> None:
    b = store.coordination
    a, c = ids(2)
    b.stops.announce_handover(a, ttl_seconds=30)
    assert b.stops.handovers_ready([a, c]) == {a}
    b.stops.clear_handovers([a, c])
    assert b.stops.handovers_ready([a]) == set()
    b.stops.clear_handovers([])


def test_a_degraded_flag_is_set_refreshed_read_and_deleted_and_matches_keys_ignore_it(store: Store) -> None:
    b = store.coordination
    behind, caught_up, never = ids(3)
    b.locks.flag_degraded_runs([behind, caught_up], [], ttl_seconds=30)
    assert b.locks.degraded_runs([behind, caught_up, never]) == {behind, caught_up}
    assert 29 < store.ttl(b.degraded_key(behind)) <= 30
    b.locks.flag_degraded_runs(
        [behind], [caught_up, never], ttl_seconds=60
    )  # refreshed; deleting none is fine
    assert b.locks.degraded_runs([behind, caught_up, never]) == {behind}
    assert 59 < store.ttl(b.degraded_key(behind)) <= 60
    assert (
        b.locks.degraded_runs([]) == set() and b.barriers.matches_with_keys() == set()
    )  # a flag puts no match on the board
    b.locks.flag_degraded_runs([], [], ttl_seconds=30)


def test_a_degraded_flag_not_set_again_expires_after_its_ttl(store: Store) -> None:
    b = store.coordination
    [behind] = ids(1)
    b.locks.flag_degraded_runs([behind], [], ttl_seconds=1)
    store.elapse(1, lambda: b.locks.degraded_runs([behind]) == set())


def test_a_first_live_mark_is_set_read_and_cleared_with_the_handovers(store: Store) -> None:
    b = store.coordination
    a, c = ids(2)
    b.stops.mark_live(a, ttl_seconds=30)
    assert b.stops.handovers_live([a, c]) == {a}
    b.stops.clear_handovers([a, c])
    assert b.stops.handovers_live([a]) == {a}  # only the waiting marks
    b.stops.clear_handovers([a, c], live_too=True)
    assert b.stops.handovers_live([a]) == set()


def test_a_handover_mark_expires(store: Store) -> None:
    (m,) = ids(1)
    store.coordination.stops.announce_handover(m, ttl_seconds=0.5)
    left = store.ttl(store.coordination.handover_key(m))
    assert left is not None and 0 < left <= 0.5
    store.elapse(0.5, lambda: store.coordination.stops.handovers_ready([m]) == set())


def test_a_stop_flag_is_set_read_and_cleared(store: Store) -> None:
    b = store.coordination
    a, c = ids(2)
    b.stops.set_stop_flag(a, ttl_seconds=30)
    assert b.stops.stop_flags_among([a, c]) == {a}
    left = store.ttl(b.stop_flag_key(a))
    assert left is not None and 29 < left <= 30
    b.stops.clear_stop_flag(a)
    assert b.stops.stop_flags_among([a]) == set()


def test_a_stop_flag_lives_at_least_a_second(store: Store) -> None:
    (m,) = ids(1)
    store.coordination.stops.set_stop_flag(m, ttl_seconds=0.01)
    left = store.ttl(store.coordination.stop_flag_key(m))
    assert left is not None and 0.1 < left <= 1  # a whole second, not the 0.01 asked for


def test_a_stop_is_pushed_to_every_subscription(store: Store) -> None:
    b = store.coordination
    (m,) = ids(1)
    first, second = b.stops.stop_subscription(), b.stops.stop_subscription()
    try:
        assert b.stops.next_stop_message(first, timeout=0.1) is None
        b.stops.set_stop_flag(m)
        assert wait_for(lambda: b.stops.next_stop_message(first, timeout=0.5)) == m
        assert wait_for(lambda: b.stops.next_stop_message(second, timeout=0.5)) == m
    finally:
        first.close()
        second.close()


def test_a_revoked_message_is_remembered_and_cannot_be_consumed(store: Store) -> None:
    b = store.coordination
    assert not b.barriers.is_revoked("msg-1")
    b.barriers.revoke_message("msg-1")
    assert b.barriers.is_revoked("msg-1")
    assert b.barriers.consume_message("msg-1") is False
    left = store.ttl(b.revoked_key("msg-1"))
    assert left is not None and 3595 < left <= 3600


def test_a_message_is_consumed_once(store: Store) -> None:
    b = store.coordination
    assert b.barriers.consume_message("msg-2") is True
    assert b.barriers.consume_message("msg-2") is False
    assert b.barriers.consumed_among(["msg-2", "msg-3"]) == {"msg-2"}
    assert b.barriers.consumed_among([]) == set()


# -- worker leases ---------------------------------------------------------------------------


def test_a_new_lease_is_created_then_extended(store: Store) -> None:
    b = store.coordination
    state, epoch = b.locks.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    assert state == 2 and epoch.startswith("e1:")
    again, same = b.locks.renew_worker_lease("w1", known_epoch=epoch, new_epoch_id="e2", ttl_seconds=8)
    assert (again, same) == (1, epoch)
    left = store.ttl(b.worker_lease_key("w1"))
    assert left is not None and 7 < left <= 8


def test_an_expired_lease_under_the_same_epoch_is_fenced(store: Store) -> None:
    b = store.coordination
    _, epoch = b.locks.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=0.3)
    store.elapse(0.3, lambda: b.locks.live_worker_leases(["w1"])[0] == set())
    state, same = b.locks.renew_worker_lease("w1", known_epoch=epoch, new_epoch_id="e2", ttl_seconds=8)
    assert (state, same) == (0, epoch)
    assert b.locks.live_worker_leases(["w1"])[0] == set()


def test_a_lease_lost_with_redis_data_is_created_again_under_a_new_epoch(store: Store) -> None:
    b = store.coordination
    _, epoch = b.locks.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    store.forget_everything()
    state, new_epoch = b.locks.renew_worker_lease("w1", known_epoch=epoch, new_epoch_id="e2", ttl_seconds=8)
    assert state == 2 and new_epoch.startswith("e2:") and new_epoch != epoch


def test_live_worker_leases_and_the_age_of_the_epoch(store: Store) -> None:
    b = store.coordination
    assert b.locks.live_worker_leases(["w1"]) == (set(), None)
    b.locks.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    alive, age = b.locks.live_worker_leases(["w1", "w2", "w1"])
    assert alive == {"w1"}
    assert age is not None and 0 <= age < 5


def test_a_lease_whose_liveness_signal_is_held_is_alive_and_one_whose_signal_ended_dies_after_the_grace(
    store: Store,
) -> None:
    b = store.coordination
    judge = functools.partial(b.locks.judge_worker_leases, grace_seconds=0.3, ttl_seconds=8)
    assert judge(["w1"]).epoch_age is None
    b.locks.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    b.locks.renew_worker_lease("w2", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    signal = b.locks.liveness_subscription("w1")
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
    again = b.locks.liveness_subscription("w1")  # re-established within the grace: alive, the grace forgotten
    try:
        assert judge(["w1"]).states["w1"] == LeaseState.ALIVE
        assert store.ttl(b.liveness_lost_key("w1")) is None
    finally:
        again.close()


def test_a_lease_without_a_liveness_signal_of_an_older_worker_is_judged_by_its_lease_alone(
    store: Store,
) -> None:
    b = store.coordination
    b.locks.renew_worker_lease("w1", known_epoch="", new_epoch_id="e1", ttl_seconds=8)
    if isinstance(b, MemoryCoordinationStore):
        b.space._set(b.worker_lease_key("w1"), "1", ttl=8)
    else:
        b.client.set(b.worker_lease_key("w1"), "1", px=8000)
    judged = b.locks.judge_worker_leases(["w1"], grace_seconds=0.0, ttl_seconds=8)
    assert judged.states == {"w1": LeaseState.ALIVE}


def test_holding_a_liveness_signal_raises_once_its_connection_is_dropped(store: Store) -> None:
    b = store.coordination
    signal = b.locks.liveness_subscription("w1")
    try:
        b.locks.hold_liveness(signal, timeout=0.01)
        if isinstance(b, MemoryCoordinationStore):
            signal.kill()
        else:
            name = b.locks.liveness_client_name("w1")
            (held,) = [c["id"] for c in b.client.client_list() if c["name"] == name]
            b.client.client_kill_filter(_id=held)
        with pytest.raises(RedisUnavailable):
            b.locks.hold_liveness(signal, timeout=2.0)
    finally:
        signal.close()


# -- scheduler ticks and bulk previews -------------------------------------------------------

AT = datetime(2024, 5, 21, 18, 0, 30, tzinfo=UTC)


def test_a_tick_slot_is_claimed_once_per_entry_and_minute(store: Store) -> None:
    b = store.coordination
    assert b.ticks.claim_tick("dispatch", AT, owner="s1", ttl_seconds=3600)
    assert not b.ticks.claim_tick("dispatch", AT + timedelta(seconds=20), owner="s2", ttl_seconds=3600)
    assert b.ticks.claim_tick("sweep", AT, owner="s2", ttl_seconds=3600)
    assert b.ticks.claim_tick("dispatch", AT + timedelta(minutes=1), owner="s2", ttl_seconds=3600)


def test_ticks_are_found_by_minute_and_the_newest_is_known(store: Store) -> None:
    b = store.coordination
    assert b.ticks.newest_tick_at() is None
    assert not b.ticks.any_tick_at(AT)
    b.ticks.claim_tick("dispatch", AT, owner="s1", ttl_seconds=3600)
    b.ticks.claim_tick("sweep", AT + timedelta(minutes=3), owner="s1", ttl_seconds=3600)
    assert b.ticks.any_tick_at(AT) and not b.ticks.any_tick_at(AT + timedelta(minutes=1))
    assert b.ticks.newest_tick_at() == datetime(2024, 5, 21, 18, 3, tzinfo=UTC)


def test_a_bulk_preview_is_taken_once(store: Store) -> None:
    b = store.coordination
    b.previews.save_bulk_preview("d1", '{"action": "stop"}', ttl_seconds=300)
    left = store.ttl(b.bulk_preview_key("d1"))
    assert left is not None and 299 < left <= 300
    assert b.previews.take_bulk_preview("d1") == '{"action": "stop"}'
    assert b.previews.take_bulk_preview("d1") is None


def test_a_bulk_preview_expires(store: Store) -> None:
    b = store.coordination
    b.previews.save_bulk_preview("d2", "{}", ttl_seconds=0.3)
    store.elapse(0.3, lambda: b.previews.take_bulk_preview("d2") is None)


# -- clearing -------------------------------------------------------------------------------


def test_a_forced_start_clears_attempts_and_holds_the_pending_key(store: Store) -> None:
    b = store.coordination
    (m,) = ids(1)
    for _ in range(3):
        b.barriers.record_failed_attempt(m)
    b.barriers.claim_pending(m)
    b.barriers.retake_for_forced_start(m)
    assert (b.barriers.attempts(m), b.barriers.is_exhausted(m), b.barriers.is_pending(m)) == (0, False, True)
    assert b.barriers.claim_pending(m) is False


def test_clearing_start_barriers_never_touches_the_start_lock(store: Store) -> None:
    b = store.coordination
    (m,) = ids(1)
    b.barriers.claim_pending(m)
    b.barriers.record_failed_attempt(m)
    b.locks.start_lock(m).acquire(token="live")
    b.barriers.clear_start_barriers(m)
    assert b.barriers.counters([m]) == [(0, False, False)]
    assert b.locks.start_lock_holder(m) == "live"


def test_ping_answers(store: Store) -> None:
    assert store.coordination.ping() is None


def test_a_message_given_back_can_be_consumed_again_and_a_revoked_one_stays_revoked(store: Store) -> None:
    b = store.coordination
    assert b.barriers.consume_message("msg-4") is True
    assert b.barriers.unconsume_message("msg-4") is True
    assert b.barriers.consumed_among(["msg-4"]) == set() and b.barriers.unconsume_message("msg-4") is False
    assert b.barriers.consume_message("msg-4") is True
    b.barriers.revoke_message("msg-5")
    assert b.barriers.unconsume_message("msg-5") is False and b.barriers.is_revoked("msg-5")


def test_a_given_back_row_is_listed_until_a_reaper_settles_it_and_then_says_so_to_its_run(
    store: Store,
) -> None:
    from models.coordination import GivenBackRow

    b = store.coordination
    row, match, other = ids(3)
    run = GivenBackRow(row, match, 12, "feed lost for 15.2 s")
    assert b.locks.given_back_rows() == []
    assert b.locks.give_back_row(run, ttl_seconds=30) is False
    assert b.locks.give_back_row(run, ttl_seconds=30) is False  # marked again each try: one mark
    assert b.locks.given_back_rows() == [run]
    assert 29 < store.ttl(b.given_back_key(row)) <= 30
    b.locks.settle_given_back_row(row)  # a reaper closed its row
    assert b.locks.given_back_rows() == []
    assert 0 < store.ttl(b.given_back_key(row)) <= 30  # its ttl kept
    assert b.locks.give_back_row(run, ttl_seconds=30) is True  # the run learns it and stops trying
    b.locks.settle_given_back_row(other)  # settling no mark writes none
    assert b.locks.give_back_row(GivenBackRow(other, match, 12, "x"), ttl_seconds=30) is False
    b.locks.forget_given_back_row(other)  # its run closed it itself
    assert b.locks.given_back_rows() == [] and b.barriers.matches_with_keys() == set()


def test_a_given_back_mark_no_run_renews_expires_and_leaves_the_list(store: Store) -> None:
    from models.coordination import GivenBackRow

    b = store.coordination
    row, match = ids(2)
    b.locks.give_back_row(GivenBackRow(row, match, 1, "DatabaseUnavailable"), ttl_seconds=1)
    store.elapse(1, lambda: b.locks.given_back_rows() == [])
