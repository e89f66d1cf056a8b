"""What a manual start answers: a forced run holds the pending key, an exhausted match is a conflict."""

from __future__ import annotations

import json

import pytest

from cli.answers import EXIT_CONFLICT
from lifecycle.cleanup import stop_match_listener
from lifecycle.dispatch import request_start
from tests.lifecycle.conftest import BOTH_BROKERS
from tests.lifecycle.helpers import enqueue_forced_start, open_rows, reload
from tests.waiting import wait_for


def _exhaust(coordination, match) -> None:
    for _ in range(coordination.attempt_cap):
        coordination.barriers.record_failed_attempt(match.id)
    assert coordination.barriers.is_exhausted(match.id)


@pytest.mark.e2e
@BOTH_BROKERS
def test_while_a_forced_run_runs_the_board_shows_its_pending_key_and_a_plain_start_is_not_enqueued(
    make_match, lsettings, lcoordination, send_start, start_worker, kick
):
    match = make_match(status="inprogress")
    start_worker()
    sent, _ = request_start(
        str(match.id), overrides=None, force=True, coordination=lcoordination, send=send_start
    )
    assert sent is not None
    [row] = wait_for(lambda: open_rows(match), timeout=60)
    assert lcoordination.locks.start_lock_holder(match.id) == str(row.id)  # the forced run is running
    [entry] = json.loads(kick("listeners", "status", "--match", str(match.id), "--json").output)["matches"]
    assert entry["badge"] == "Running" and entry["pending"] is True
    plain = kick("listeners", "start", str(match.id)).output
    assert "already queued or running" in plain and "enqueued as" not in plain
    assert reload(match).start_message_id == sent.message_id  # the running start's id is kept
    stop_match_listener(str(match.id), settings=lsettings, coordination=lcoordination)
    wait_for(lambda: lcoordination.locks.start_lock_holder(match.id) is None, timeout=30)


def test_a_plain_start_of_an_exhausted_match_is_a_conflict_naming_force_and_enqueues_nothing(
    kick, make_match, lcoordination, broker_queues
):
    match = make_match()
    _exhaust(lcoordination, match)
    out = kick("listeners", "start", str(match.id), code=EXIT_CONFLICT).output
    assert "exhausted" in out and "--force" in out and "enqueued as" not in out
    data = json.loads(kick("listeners", "start", str(match.id), "--json", code=EXIT_CONFLICT).stdout)
    assert data["exhausted"] is True and data["enqueued"] is False and "--force" in data["detail"]
    assert data["status"] == "conflict" and "exhausted" in data["error"]  # the shared answer (cli/answers.py)
    assert not lcoordination.barriers.is_pending(match.id) and reload(match).start_message_id is None
    assert broker_queues("match_listeners") == 0
    assert "(force)" in kick("listeners", "start", str(match.id), "--force", "--reason", "drill").output
    assert broker_queues("match_listeners") == 1


def test_enqueue_start_match_listener_of_an_exhausted_match_is_a_conflict_unless_forced(
    kick, make_match, lcoordination, broker_queues
):
    match = make_match()
    _exhaust(lcoordination, match)
    out = kick("enqueue", "start_match_listener", "--kw", f"match_id={match.id}", code=EXIT_CONFLICT).output
    assert "exhausted" in out and "--force" in out and broker_queues("match_listeners") == 0
    args = ("enqueue", "start_match_listener", "--kw", f"match_id={match.id}", "--json")
    data = json.loads(kick(*args, code=EXIT_CONFLICT).stdout)
    assert data["status"] == "conflict" and "--force" in data["error"]
    enqueue_forced_start(kick, match.id)
    assert broker_queues("match_listeners") == 1
