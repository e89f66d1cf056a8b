"""A pending key no start can clear any more is reclaimed; a queued start's pending key is kept."""

from __future__ import annotations

import pytest

from lifecycle.cleanup import set_auto_dispatch, stop_match_listener, sweep_stale_match_listeners
from models.coordination import CoordinationStore
from tests.lifecycle.helpers import dispatch
from tests.waiting import wait_for


@pytest.fixture
def sb(lsettings, lcoordination):
    return {"settings": lsettings, "coordination": lcoordination}


def _sweep(sb):
    return sweep_stale_match_listeners(settings=sb["settings"], coordination=sb["coordination"])


def test_a_start_that_died_holding_the_lock_before_its_row_stops_blocking_dispatch_once_the_lock_expired(
    make_match, sb, outbox
):
    match = make_match()
    b = sb["coordination"]
    dispatch(send=outbox, **sb)
    [message] = outbox.messages
    b.barriers.consume_message(message.message_id)  # the start began ...
    short = CoordinationStore(b.client, prefix=b.prefix, url=b.url, stale_seconds=2)  # (a lock TTL of 2 s)
    lock = short.locks.start_lock(match.id)
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
    assert sb["coordination"].barriers.is_pending(match.id)
    assert dispatch(send=outbox, **sb).enqueued == 0


def test_a_pending_key_left_inside_a_stops_race_window_is_cleared_when_dispatch_is_turned_back_on(
    make_match, sb, outbox
):
    match = make_match()
    b = sb["coordination"]
    stop_match_listener(str(match.id), **sb)
    b.barriers.claim_pending(match.id)  # claimed by a start racing the stop; its start skipped as stopped
    set_auto_dispatch(str(match.id), True, coordination=b)
    assert not b.barriers.is_pending(match.id)
    assert dispatch(send=outbox, **sb).enqueued == 1


def _unreachable(*args, **kwargs):
    from config.errors import DatabaseUnavailable

    raise DatabaseUnavailable(service="PostgreSQL", setting="DATABASE_URL", address="db", reason="cut")


def _redis_gone(*args, **kwargs):
    from config.errors import RedisUnavailable

    raise RedisUnavailable(service="Redis", setting="REDIS_URL", address="r", reason="cut")


def _start_stored(match, message, *, services, handoff: bool, sb: dict) -> None:
    """The start of ``match`` its dispatch stored as ``message`` (a hand-off successor's when told)."""
    from lifecycle import guarded_start

    guarded_start.start_match_listener(
        str(match.id), None, False, message_id=message.message_id, services=services, handoff=handoff, **sb
    )


@pytest.mark.parametrize("handoff", [False, True], ids=["start", "hand-off successor"])
def test_a_start_that_cannot_reach_postgresql_gives_its_message_back_and_keeps_its_pending_key(
    make_match, sb, outbox, services, monkeypatch, handoff
):
    """The same message runs again within seconds on a worker that reaches PostgreSQL (findings 6, 7)."""
    from lifecycle import guarded_start
    from lifecycle.errors import StartGivenBack

    match = make_match(status="inprogress")
    dispatch(send=outbox, **sb)
    [message] = outbox.messages
    # a hand-off successor's lock is taken after its wait for the predecessor, under a second slot
    monkeypatch.setattr(guarded_start, "_take_start_lock" if handoff else "stored_message_id", _unreachable)
    with pytest.raises(StartGivenBack):
        _start_stored(match, message, services=services, handoff=handoff, sb=sb)
    assert sb["coordination"].barriers.is_pending(match.id)  # the message given back still stands for it
    assert sb["coordination"].barriers.consumed_among([message.message_id]) == set()
    assert sb["coordination"].barriers.attempts(match.id) == 0  # not the match's failure


@pytest.mark.parametrize("handoff", [False, True], ids=["start", "hand-off successor"])
def test_a_start_that_cannot_reach_postgresql_nor_give_its_message_back_frees_its_pending_key(
    make_match, sb, outbox, services, monkeypatch, handoff
):
    from config.errors import DatabaseUnavailable
    from lifecycle import guarded_start

    match = make_match(status="inprogress")
    dispatch(send=outbox, **sb)
    [message] = outbox.messages
    monkeypatch.setattr(guarded_start, "_take_start_lock" if handoff else "stored_message_id", _unreachable)
    monkeypatch.setattr(
        sb["coordination"].barriers, "unconsume_message", _redis_gone
    )  # (Redis went away too)
    with pytest.raises(DatabaseUnavailable):
        _start_stored(match, message, services=services, handoff=handoff, sb=sb)
    assert not sb["coordination"].barriers.is_pending(match.id)
    assert sb["coordination"].barriers.attempts(match.id) == 0  # not the match's failure
    monkeypatch.undo()
    assert dispatch(send=outbox, **sb).enqueued == 1  # at once, not after the sweep's reclaim
