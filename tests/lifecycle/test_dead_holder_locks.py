"""Stop and sweep delete a start lock only when its holder must already have stopped itself."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from config.clock import utcnow
from lifecycle.cleanup import stop_match_listener, sweep_stale_match_listeners
from models.listener_record import MatchListenerRecord


def _holder(match, coordination, *, silent_for: float) -> str:
    """An open row whose last heartbeat is ``silent_for`` seconds old, holding the start lock."""
    record_id = str(uuid.uuid4())
    past = utcnow() - timedelta(seconds=silent_for)
    MatchListenerRecord.create(id=record_id, match=match.id, created_at=past, heartbeat_at=past)
    assert coordination.locks.start_lock(match.id).acquire(record_id)
    return record_id


@pytest.mark.parametrize(
    ("silent_factor", "deleted"),
    [(0.7, False), (1.5, True)],
    ids=[
        "silent past interval and grace but not yet stale: kept",
        "silent past the stale threshold: deleted",
    ],
)
@pytest.mark.parametrize("action", ["stop", "sweep 0"])
def test_a_closed_rows_lock_is_deleted_only_once_its_holder_must_have_stopped_itself(
    make_match, lsettings, lcoordination, silent_factor, deleted, action
):
    # Short settings: interval 0.2 s + grace 0.3 s = 0.5 s; stale (and lock TTL) 1.5 s. A holder
    # whose row writes fail keeps its lock alive via Redis until ~1.0 s of failed writes.
    match = make_match()
    silent = lsettings.listener_heartbeat_stale_seconds * silent_factor
    assert silent > lsettings.listener_heartbeat_interval_seconds + lsettings.listener_lock_loss_grace_seconds
    record_id = _holder(match, lcoordination, silent_for=silent)
    if action == "stop":
        stop_match_listener(str(match.id), settings=lsettings, coordination=lcoordination)
    else:
        sweep_stale_match_listeners(heartbeat_stale_seconds=0, settings=lsettings, coordination=lcoordination)
    holder = lcoordination.locks.start_lock_holder(match.id)
    assert holder == (None if deleted else record_id)
