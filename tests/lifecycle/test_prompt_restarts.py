"""Matches restarted at once instead of at the next dispatch tick (the chaos run's findings 2 and 4).

In process on the real services: the start, the reaper's query and Redis script, and the
dispatch they call (its selection, attempt cap and pending keys), with a recording sender.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from config import clock
from config.settings import MatchListenerEnvironment
from lifecycle import dispatch
from lifecycle.cleanup import ORPHAN_RESTART_EVERY_SECONDS, orphans_of_fenced_runs
from lifecycle.runtime import ListenerServices
from listener.exit_codes import ExitCode
from models.coordination import CoordinationStore
from models.listener_record import MatchListenerRecord
from models.match import Match
from tests.lifecycle.conftest import Outbox
from tests.lifecycle.helpers import start
from tests.waiting import wait_for


def _epoch_aged(barriers: CoordinationStore, seconds: float) -> None:
    """Pretend Redis has kept its data for ``seconds`` (the reaper judges nothing before)."""
    now = int(barriers.client.time()[0])
    barriers.client.set(barriers.epoch_key, f"test:{now - int(seconds)}")


@pytest.fixture
def sent() -> Outbox:
    """The start messages a redispatch sent (through the batch sender dispatch calls)."""
    return Outbox()


@pytest.fixture
def restarting(
    lsettings: MatchListenerEnvironment, lbarriers: CoordinationStore, sent: Outbox
) -> Iterator[dict[str, Any]]:
    """Start arguments whose services restart matches through the real dispatch into ``sent``.

    LISTENER_RECONNECT_RESET_SECONDS is 1 s: a run that lasts that long has streamed.
    """
    settings = lsettings.model_copy(update={"listener_reconnect_reset_seconds": 1.0})

    def redispatch(match_ids: list[str]) -> None:
        dispatch.dispatch_matches(match_ids, settings=settings, barriers=lbarriers, send_batch=sent.extend)

    svc = ListenerServices(settings=settings, barriers=lbarriers, redispatch=redispatch)
    yield {"settings": settings, "barriers": lbarriers, "services": svc}
    svc.shutdown_all()
    svc.close()


def _feed_lost_after(seconds: float) -> dict[str, Any]:
    """Run overrides: stream ``seconds``, then exit 12 (the reconnects ran out)."""
    return {
        "listener_test_duration_seconds": seconds,
        "listener_test_exit_code": int(ExitCode.CONNECTION_ERROR),
    }


def test_a_run_that_ran_out_of_reconnects_after_streaming_is_dispatched_again_at_once(
    make_match, restarting, sent
):
    match = make_match(status="inprogress")
    result = start(match, overrides=_feed_lost_after(1.5), **restarting)
    assert result.exit_code == int(ExitCode.CONNECTION_ERROR) and not result.success
    assert result.attempts == 1  # still a counted failure
    assert sent.match_ids == [str(match.id)]  # not left for the next dispatch tick
    assert restarting["barriers"].is_pending(match.id)  # the new start holds the pending key
    assert Match.get_by_id(match.id).start_message_id == sent.messages[0].message_id


def test_a_run_that_lost_the_feed_at_once_waits_for_the_dispatch_tick(make_match, restarting, sent):
    """A feed still down when the run started: restarting it at once would only spin faster."""
    match = make_match(status="inprogress")
    result = start(match, overrides=_feed_lost_after(0), **restarting)
    assert result.exit_code == int(ExitCode.CONNECTION_ERROR)
    assert sent.messages == []


def test_a_match_that_is_exhausted_stopped_or_over_is_not_dispatched_again(make_match, restarting, sent):
    barriers: CoordinationStore = restarting["barriers"]
    exhausted = make_match(status="inprogress")
    for _ in range(barriers.attempt_cap - 1):
        barriers.record_failed_attempt(exhausted.id)
    not_auto = make_match(status="inprogress", auto_dispatch_listener=False)
    over = make_match(status="closed")
    for match in (exhausted, not_auto, over):
        assert start(match, overrides=_feed_lost_after(1.2), **restarting).exit_code == 12
    assert barriers.is_exhausted(exhausted.id)  # this exit reached the cap: nothing sent
    assert sent.messages == []


# -- finding 4: a fenced run whose keys a Redis restart lost ---------------------------------


@pytest.fixture
def wide(lsettings: MatchListenerEnvironment) -> MatchListenerEnvironment:
    """The settings the orphan checks read: "recently closed" is within 120 s here (the stale
    threshold; 1.5 s in process, too short for a loaded machine between a row's close and the check)."""
    return lsettings.model_copy(update={"listener_heartbeat_stale_seconds": 120.0})


def _closed_row(match: Match, *, exit_code: int, lease: str | None = "a-fenced-worker") -> str:
    """A row closed just now."""
    record_id = str(uuid.uuid4())
    MatchListenerRecord.insert(
        id=record_id,
        match=match.id,
        worker_lease=lease,
        exit_code=exit_code,
        exit_reason="worker lease expired",
        ended_at=clock.utcnow(),
    ).execute()
    return record_id


def test_the_reaper_restarts_a_fenced_runs_match_that_lost_its_keys_once_per_spacing(
    make_match, wide, lbarriers
):
    fenced, abandoned = make_match(status="inprogress"), make_match(status="inprogress")
    _closed_row(fenced, exit_code=int(ExitCode.CANCELLED))
    _closed_row(abandoned, exit_code=int(ExitCode.ABANDONED))
    _epoch_aged(lbarriers, 1)
    assert orphans_of_fenced_runs(settings=wide, barriers=lbarriers) == []  # Redis just restarted
    _epoch_aged(lbarriers, 3600)
    assert orphans_of_fenced_runs(settings=wide, barriers=lbarriers) == sorted(
        [str(fenced.id), str(abandoned.id)]
    )
    assert orphans_of_fenced_runs(settings=wide, barriers=lbarriers) == []  # once per spacing
    left = lbarriers.client.ttl(lbarriers.orphan_restart_key(fenced.id))
    assert 0 < left <= ORPHAN_RESTART_EVERY_SECONDS


def test_the_reaper_leaves_matches_that_something_else_restarts_or_that_ended_otherwise(
    make_match, wide, lbarriers
):
    locked, pending, running, stopped, unleased = (make_match(status="inprogress") for _ in range(5))
    for match in (locked, pending, running):
        _closed_row(match, exit_code=int(ExitCode.CANCELLED))
    lbarriers.start_lock(locked.id).acquire("a-starting-run")
    lbarriers.claim_pending(pending.id)
    MatchListenerRecord.create(match=running.id)  # its successor runs
    _closed_row(stopped, exit_code=int(ExitCode.STOPPED))
    _closed_row(unleased, exit_code=int(ExitCode.CANCELLED), lease=None)
    _epoch_aged(lbarriers, 3600)
    assert orphans_of_fenced_runs(settings=wide, barriers=lbarriers) == []


def test_a_reaper_thread_dispatches_the_orphaned_match_once(make_match, lsettings, wide, lbarriers, sent):
    match = make_match(status="inprogress")
    _closed_row(match, exit_code=int(ExitCode.CANCELLED))
    _epoch_aged(lbarriers, 3600)

    def redispatch(match_ids: list[str]) -> None:
        dispatch.dispatch_matches(match_ids, settings=lsettings, barriers=lbarriers, send_batch=sent.extend)

    svc = ListenerServices(
        settings=lsettings,
        barriers=lbarriers,
        reap=lambda: orphans_of_fenced_runs(settings=wide, barriers=lbarriers),
        redispatch=redispatch,
    )
    svc.start()
    try:
        wait_for(lambda: sent.match_ids == [str(match.id)], timeout=30, what="the orphan's restart")
        assert lbarriers.is_pending(match.id)
    finally:
        svc.shutdown_all()
        svc.close()
    assert sent.match_ids == [str(match.id)]  # the pending key (then the mark) kept it at one


# -- finding 3: a restart taken by a worker cut from PostgreSQL ---------------------------------


def test_a_restart_a_worker_cut_from_postgresql_gave_up_is_sent_again_by_a_healthy_reaper(
    make_match, lsettings, wide, lbarriers, sent, services, monkeypatch
):
    """The fenced run's match was restarted, the start went to a host cut from PostgreSQL and
    freed its pending key: the next reaper step elsewhere restarts it (not the dispatch tick)."""
    from config.errors import DatabaseUnavailable
    from lifecycle import start_match

    match = make_match(status="inprogress")
    _closed_row(match, exit_code=int(ExitCode.CANCELLED))
    _epoch_aged(lbarriers, 3600)
    dispatch.dispatch_matches([str(match.id)], settings=lsettings, barriers=lbarriers, send_batch=sent.extend)
    [restart] = sent.messages  # the restart the fence's reaper sent
    assert orphans_of_fenced_runs(settings=wide, barriers=lbarriers) == []  # its start is pending

    def unreachable(match_id):
        raise DatabaseUnavailable(service="PostgreSQL", setting="DATABASE_URL", address="db", reason="cut")

    monkeypatch.setattr(start_match, "stored_message_id", unreachable)  # (a host cut from PostgreSQL)
    with pytest.raises(DatabaseUnavailable):
        start_match.start_match_listener(
            str(match.id),
            None,
            False,
            message_id=restart.message_id,
            settings=lsettings,
            barriers=lbarriers,
            services=services,
        )
    monkeypatch.undo()
    assert not lbarriers.is_pending(match.id)
    again = orphans_of_fenced_runs(settings=wide, barriers=lbarriers)  # a healthy worker's reaper
    assert again == [str(match.id)]
    dispatch.dispatch_matches(again, settings=lsettings, barriers=lbarriers, send_batch=sent.extend)
    assert sent.match_ids == [str(match.id)] * 2
    assert Match.get_by_id(match.id).start_message_id == sent.messages[1].message_id


# -- develop restarts test clones only (issue 38, row 3) ---------------------------------------


def test_in_develop_a_restart_dispatches_the_test_clone_and_leaves_the_live_match(
    make_match, lsettings, lbarriers, sent
):
    """The reaper's, the sweep's, a shutdown's hand-off and a reconnect restart all send through
    dispatch_matches: in develop only is_test matches, as develop's periodic dispatch."""
    from config.settings import AppEnv

    live = make_match(status="inprogress")
    clone = make_match(status="inprogress", is_test=True)
    develop = lsettings.model_copy(update={"app_env": AppEnv.DEVELOP})
    ids = [str(live.id), str(clone.id)]
    dispatch.dispatch_matches(ids, settings=develop, barriers=lbarriers, send_batch=sent.extend)
    assert sent.match_ids == [str(clone.id)]
    assert not lbarriers.is_pending(live.id)
    staging = lsettings.model_copy(update={"app_env": AppEnv.STAGING})
    dispatch.dispatch_matches(ids, settings=staging, barriers=lbarriers, send_batch=sent.extend)
    assert sent.match_ids == [str(clone.id), str(live.id)]  # elsewhere live matches too


def test_in_develop_a_live_run_that_lost_the_feed_after_streaming_is_not_restarted(
    make_match, restarting, sent
):
    from config.settings import AppEnv

    develop = restarting["settings"].model_copy(update={"app_env": AppEnv.DEVELOP})

    def redispatch(match_ids: list[str]) -> None:
        dispatch.dispatch_matches(
            match_ids, settings=develop, barriers=restarting["barriers"], send_batch=sent.extend
        )

    restarting["services"].redispatch = redispatch
    match = make_match(status="inprogress")
    result = start(match, overrides=_feed_lost_after(1.5), **restarting)
    assert result.exit_code == int(ExitCode.CONNECTION_ERROR)
    assert sent.messages == []
