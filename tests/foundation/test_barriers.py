"""Redis barriers against a real Redis: token-safe locks, pending keys, attempts, stop flags."""

from __future__ import annotations

import time
import uuid

import pytest
from redis import exceptions as redis_exceptions

from config.errors import LockNotOwned, RedisCommandRefused, RedisUnavailable
from models.coordination import CoordinationStore, TokenLock, connect_redis, redis_errors


def other_client_lock(coordination: CoordinationStore, key_match: str, ttl: float = 5.0) -> TokenLock:
    """The same lock key seen from a second, independent Redis client."""
    second = connect_redis(coordination.url)
    return TokenLock(second, coordination.start_lock_key(key_match), ttl_seconds=ttl, url=coordination.url)


def test_a_start_lock_is_taken_by_one_holder_only(coordination):
    match_id = uuid.uuid4()
    mine = coordination.locks.start_lock(match_id)
    theirs = other_client_lock(coordination, match_id)
    assert mine.acquire()
    assert not theirs.acquire()
    assert mine.owned() and not theirs.owned()


def test_a_second_client_cannot_release_a_lock_it_does_not_hold(coordination):
    match_id = uuid.uuid4()
    mine = coordination.locks.start_lock(match_id)
    assert mine.acquire()
    theirs = other_client_lock(coordination, match_id).adopt("not-the-token")
    with pytest.raises(LockNotOwned):
        theirs.release()
    assert mine.owned()


def test_a_second_client_cannot_extend_a_lock_it_does_not_hold(coordination, redis_client):
    match_id = uuid.uuid4()
    mine = coordination.locks.start_lock(match_id)
    assert mine.acquire()
    redis_client.pexpire(mine.key, 1000)
    theirs = other_client_lock(coordination, match_id).adopt("forged-token")
    with pytest.raises(LockNotOwned):
        theirs.extend()
    assert redis_client.pttl(mine.key) <= 1000


def test_the_holder_extends_its_lock_to_the_full_lifetime(coordination, redis_client):
    match_id = uuid.uuid4()
    lock = coordination.locks.start_lock(match_id)
    assert lock.acquire()
    redis_client.pexpire(lock.key, 500)
    lock.extend()
    assert redis_client.pttl(lock.key) > 170_000  # stale threshold is 180 s


def test_a_holder_that_knows_the_token_can_release_from_another_process(coordination):
    match_id = uuid.uuid4()
    mine = coordination.locks.start_lock(match_id)
    assert mine.acquire()
    successor_view = other_client_lock(coordination, match_id).adopt(mine.token)
    successor_view.release()
    assert not mine.locked()


def test_expiry_frees_a_lock_and_the_old_holder_can_no_longer_extend_it(settings, redis_client):
    coordination = CoordinationStore.from_settings(
        settings.model_copy(update={"listener_heartbeat_stale_seconds": 0.2}), client=redis_client
    )
    match_id = uuid.uuid4()
    old = coordination.locks.start_lock(match_id)
    assert old.acquire()
    time.sleep(0.35)
    new = coordination.locks.start_lock(match_id)
    assert new.acquire()
    with pytest.raises(LockNotOwned):
        old.extend()
    with pytest.raises(LockNotOwned):
        old.release()
    assert new.owned()


def test_the_context_manager_releases_only_its_own_lock(coordination):
    lock = coordination.locks.dispatch_lock()
    with lock as got:
        assert got
        assert not coordination.locks.dispatch_lock().acquire()
    assert coordination.locks.dispatch_lock().acquire()


def test_the_pending_key_is_claimed_once(coordination):
    match_id = uuid.uuid4()
    assert coordination.barriers.claim_pending(match_id)
    assert not coordination.barriers.claim_pending(match_id)
    coordination.barriers.clear_pending(match_id)
    assert coordination.barriers.claim_pending(match_id)


def test_failed_attempts_are_counted_with_a_ttl_and_exhaust_at_the_cap(coordination, redis_client):
    match_id = uuid.uuid4()
    for n in range(1, coordination.attempt_cap):
        assert coordination.barriers.record_failed_attempt(match_id) == n
        assert not coordination.barriers.is_exhausted(match_id)
    assert coordination.barriers.record_failed_attempt(match_id) == coordination.attempt_cap
    assert coordination.barriers.is_exhausted(match_id)
    ttl = redis_client.ttl(coordination.attempts_key(match_id))
    assert 12 * 3600 - 5 < ttl <= 12 * 3600
    assert coordination.barriers.exhausted_among([match_id, uuid.uuid4()]) == {str(match_id)}


def test_clearing_start_barriers_never_touches_the_start_lock(coordination):
    match_id = uuid.uuid4()
    coordination.barriers.claim_pending(match_id)
    coordination.barriers.record_failed_attempt(match_id)
    lock = coordination.locks.start_lock(match_id)
    lock.acquire()
    coordination.barriers.clear_start_barriers(match_id)
    assert not coordination.barriers.is_pending(match_id) and coordination.barriers.attempts(match_id) == 0
    assert lock.owned()


def test_stop_flags_are_read_for_many_matches_in_one_call(coordination):
    ids = [uuid.uuid4() for _ in range(5)]
    coordination.stops.set_stop_flag(ids[1])
    coordination.stops.set_stop_flag(ids[3])
    assert coordination.stops.stop_flags_among(ids) == {str(ids[1]), str(ids[3])}
    coordination.stops.clear_stop_flag(ids[1])
    assert coordination.stops.stop_flags_among(ids) == {str(ids[3])}


def test_revoked_message_ids_are_remembered(coordination):
    mid = f"start-match-listener.{uuid.uuid4()}.{uuid.uuid4()}"
    assert not coordination.barriers.is_revoked(mid)
    coordination.barriers.revoke_message(mid)
    assert coordination.barriers.is_revoked(mid)


def test_every_key_carries_the_configured_prefix(coordination, redis_client, settings):
    match_id = uuid.uuid4()
    coordination.barriers.claim_pending(match_id)
    coordination.barriers.record_failed_attempt(match_id)
    coordination.locks.start_lock(match_id).acquire()
    coordination.stops.set_stop_flag(match_id)
    coordination.barriers.revoke_message("m1")
    keys = [k.decode() for k in redis_client.scan_iter(match=f"*{match_id}*")]
    assert len(keys) == 4
    assert all(k.startswith(settings.redis_key_prefix) for k in keys)


def test_an_unreachable_redis_is_reported_with_the_setting_and_address():
    url = "redis://127.0.0.1:1/0"
    coordination = CoordinationStore(connect_redis(url), prefix="x:", url=url)
    with pytest.raises(RedisUnavailable, match=r"REDIS_URL=redis://127\.0\.0\.1:1/0"):
        coordination.barriers.claim_pending("m")


@pytest.mark.parametrize(
    "refusal",
    [
        redis_exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
        redis_exceptions.ResponseError("MISCONF Redis is configured to save RDB snapshots, but it's failing"),
        redis_exceptions.MasterDownError(
            "Link with MASTER is down and replica-serve-stale-data is set to 'no'."
        ),
        redis_exceptions.ResponseError("BUSY Redis is busy running a script."),
        redis_exceptions.ReadOnlyError("You can't write against a read only replica."),
        redis_exceptions.ResponseError(
            "Command # 1 (SET a b) of pipeline caused error: MISCONF failing to save"
        ),
    ],
)
def test_a_redis_that_refuses_every_write_is_an_outage(refusal):
    with pytest.raises(RedisUnavailable, match="REDIS_URL"), redis_errors(url="redis://127.0.0.1:6379/0"):
        raise refusal


def test_a_refusal_of_one_keys_data_is_a_refused_command():
    wrongtype = redis_exceptions.ResponseError(
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    )
    with pytest.raises(RedisCommandRefused, match="WRONGTYPE"), redis_errors(url="redis://127.0.0.1:6379/0"):
        raise wrongtype
