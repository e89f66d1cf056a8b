"""A pending key no start can clear any more is reclaimed; a queued start's pending key is kept."""

from __future__ import annotations

import pytest

from lifecycle.cleanup import set_auto_dispatch, stop_match_listener, sweep_stale_match_listeners
from models.coordination import CoordinationStore
from tests.lifecycle.helpers import dispatch
from tests.waiting import wait_for


@pytest.fixture
def sb(lsettings, lbarriers):
    return {"settings": lsettings, "barriers": lbarriers}


def _sweep(sb):
    return sweep_stale_match_listeners(settings=sb["settings"], barriers=sb["barriers"])


def test_a_start_that_died_holding_the_lock_before_its_row_stops_blocking_dispatch_once_the_lock_expired(
    make_match, sb, outbox
):
    match = make_match()
    b = sb["barriers"]
    dispatch(send=outbox, **sb)
    [message] = outbox.messages
    b.consume_message(message.message_id)  # the start began ...
    short = CoordinationStore(b.client, prefix=b.prefix, url=b.url, stale_seconds=2)  # (a lock TTL of 2 s)
    lock = short.start_lock(match.id)
    assert lock.acquire("dead-token")  # ... took the lock, then its worker died
    assert _sweep(sb).pending_reclaimed == []  # the lock still holds: it may be alive
    assert lock.locked()  # (it was still held during that sweep)
    wait_for(lambda: not lock.locked(), timeout=60)  # the lock's TTL ran out
    assert _sweep(sb).pending_reclaimed == [str(match.id)]
    assert dispatch(send=outbox, **sb).enqueued == 1


def test_a_queued_start_keeps_its_pending_key_through_a_sweep(make_match, sb, outbox):
    match = make_match()
    dispatch(send=outbox, **sb)  # stored and sent, not consumed yet: no lock, no row
    assert _sweep(sb).pending_reclaimed == []
    assert sb["barriers"].is_pending(match.id)
    assert dispatch(send=outbox, **sb).enqueued == 0


def test_a_pending_key_left_inside_a_stops_race_window_is_cleared_when_dispatch_is_turned_back_on(
    make_match, sb, outbox
):
    match = make_match()
    b = sb["barriers"]
    stop_match_listener(str(match.id), **sb)
    b.claim_pending(match.id)  # claimed by a start racing the stop; its start skipped as stopped
    set_auto_dispatch(str(match.id), True, barriers=b)
    assert not b.is_pending(match.id)
    assert dispatch(send=outbox, **sb).enqueued == 1


def test_a_start_that_cannot_reach_postgresql_frees_its_pending_key_for_the_next_dispatch(
    make_match, sb, outbox, services, monkeypatch
):
    from config.errors import DatabaseUnavailable
    from lifecycle import start_match

    match = make_match(status="inprogress")
    dispatch(send=outbox, **sb)
    [message] = outbox.messages

    def unreachable(match_id):
        raise DatabaseUnavailable(service="PostgreSQL", setting="DATABASE_URL", address="db", reason="cut")

    monkeypatch.setattr(start_match, "stored_message_id", unreachable)  # (a host cut from PostgreSQL)
    with pytest.raises(DatabaseUnavailable):
        start_match.start_match_listener(
            str(match.id), None, False, message_id=message.message_id, services=services, **sb
        )
    assert not sb["barriers"].is_pending(match.id)
    assert sb["barriers"].attempts(match.id) == 0  # not the match's failure
    monkeypatch.undo()
    assert dispatch(send=outbox, **sb).enqueued == 1  # at once, not after the sweep's reclaim


def test_a_hand_off_successor_that_cannot_reach_postgresql_frees_its_pending_key_too(
    make_match, sb, outbox, services, monkeypatch
):
    from config.errors import DatabaseUnavailable
    from lifecycle import start_match

    match = make_match(status="inprogress")
    dispatch(send=outbox, **sb)
    [message] = outbox.messages

    def unreachable(*args, **kwargs):
        raise DatabaseUnavailable(service="PostgreSQL", setting="DATABASE_URL", address="db", reason="cut")

    # the successor's lock is taken after its wait for the predecessor, under a second database slot
    monkeypatch.setattr(start_match, "_take_start_lock", unreachable)
    with pytest.raises(DatabaseUnavailable):
        start_match.start_match_listener(
            str(match.id), None, False, message_id=message.message_id, services=services, handoff=True, **sb
        )
    assert not sb["barriers"].is_pending(match.id)
    assert sb["barriers"].attempts(match.id) == 0
    monkeypatch.undo()
    assert dispatch(send=outbox, **sb).enqueued == 1
