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


def _start_with_body(match: Any, restarting: dict[str, Any], body: str) -> Any:
    """Start ``match`` in-process on ``restarting``'s services with this module's listener body ``body``."""
    from lifecycle import guarded_start

    return guarded_start.start_match_listener(
        str(match.id),
        None,
        False,
        message_id=None,
        settings=restarting["settings"],
        coordination=restarting["coordination"],
        services=restarting["services"],
        local={"listener_body": f"tests.lifecycle.test_prompt_restarts:{body}"},
    )


def _epoch_aged(coordination: CoordinationStore, seconds: float) -> None:
    """Pretend Redis has kept its data for ``seconds`` (the reaper judges nothing before)."""
    now = int(coordination.client.time()[0])
    coordination.client.set(coordination.epoch_key, f"test:{now - int(seconds)}")


@pytest.fixture
def sent() -> Outbox:
    """The start messages a redispatch sent (through the batch sender dispatch calls)."""
    return Outbox()


@pytest.fixture
def restarting(
    lsettings: MatchListenerEnvironment, lcoordination: CoordinationStore, sent: Outbox
) -> Iterator[dict[str, Any]]:
    """Start arguments whose services restart matches through the real dispatch into ``sent``.

    LISTENER_RECONNECT_RESET_SECONDS is 1 s: a run that lasts that long has streamed.
    """
    settings = lsettings.model_copy(update={"listener_reconnect_reset_seconds": 1.0})

    def redispatch(match_ids: list[str]) -> None:
        dispatch.dispatch_matches(
            match_ids, settings=settings, coordination=lcoordination, send_batch=sent.extend
        )

    svc = ListenerServices(settings=settings, coordination=lcoordination, redispatch=redispatch)
    yield {"settings": settings, "coordination": lcoordination, "services": svc}
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
    assert restarting["coordination"].barriers.is_pending(match.id)  # the new start holds the pending key
    assert Match.get_by_id(match.id).start_message_id == sent.messages[0].message_id


def test_a_run_that_lost_the_feed_at_once_waits_for_the_dispatch_tick(make_match, restarting, sent):
    """A feed still down when the run started: restarting it at once would only spin faster."""
    match = make_match(status="inprogress")
    result = start(match, overrides=_feed_lost_after(0), **restarting)
    assert result.exit_code == int(ExitCode.CONNECTION_ERROR)
    assert sent.messages == []


def test_a_match_that_is_exhausted_stopped_or_over_is_not_dispatched_again(make_match, restarting, sent):
    coordination: CoordinationStore = restarting["coordination"]
    exhausted = make_match(status="inprogress")
    for _ in range(coordination.attempt_cap - 1):
        coordination.barriers.record_failed_attempt(exhausted.id)
    not_auto = make_match(status="inprogress", auto_dispatch_listener=False)
    over = make_match(status="closed")
    for match in (exhausted, not_auto, over):
        assert start(match, overrides=_feed_lost_after(1.2), **restarting).exit_code == 12
    assert coordination.barriers.is_exhausted(exhausted.id)  # this exit reached the cap: nothing sent
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
    make_match, wide, lcoordination
):
    fenced, abandoned = make_match(status="inprogress"), make_match(status="inprogress")
    _closed_row(fenced, exit_code=int(ExitCode.CANCELLED))
    _closed_row(abandoned, exit_code=int(ExitCode.ABANDONED))
    _epoch_aged(lcoordination, 1)
    assert orphans_of_fenced_runs(settings=wide, coordination=lcoordination) == []  # Redis just restarted
    _epoch_aged(lcoordination, 3600)
    assert orphans_of_fenced_runs(settings=wide, coordination=lcoordination) == sorted(
        [str(fenced.id), str(abandoned.id)]
    )
    assert orphans_of_fenced_runs(settings=wide, coordination=lcoordination) == []  # once per spacing
    left = lcoordination.client.ttl(lcoordination.orphan_restart_key(fenced.id))
    assert 0 < left <= ORPHAN_RESTART_EVERY_SECONDS


def test_the_reaper_leaves_matches_that_something_else_restarts_or_that_ended_otherwise(
    make_match, wide, lcoordination
):
    locked, pending, running, stopped, unleased = (make_match(status="inprogress") for _ in range(5))
    for match in (locked, pending, running):
        _closed_row(match, exit_code=int(ExitCode.CANCELLED))
    lcoordination.locks.start_lock(locked.id).acquire("a-starting-run")
    lcoordination.barriers.claim_pending(pending.id)
    MatchListenerRecord.create(match=running.id)  # its successor runs
    _closed_row(stopped, exit_code=int(ExitCode.STOPPED))
    _closed_row(unleased, exit_code=int(ExitCode.CANCELLED), lease=None)
    _epoch_aged(lcoordination, 3600)
    assert orphans_of_fenced_runs(settings=wide, coordination=lcoordination) == []


def test_a_reaper_thread_dispatches_the_orphaned_match_once(make_match, lsettings, wide, lcoordination, sent):
    match = make_match(status="inprogress")
    _closed_row(match, exit_code=int(ExitCode.CANCELLED))
    _epoch_aged(lcoordination, 3600)

    def redispatch(match_ids: list[str]) -> None:
        dispatch.dispatch_matches(
            match_ids, settings=lsettings, coordination=lcoordination, send_batch=sent.extend
        )

    svc = ListenerServices(
        settings=lsettings,
        coordination=lcoordination,
        reap=lambda: orphans_of_fenced_runs(settings=wide, coordination=lcoordination),
        redispatch=redispatch,
    )
    svc.start()
    try:
        wait_for(lambda: sent.match_ids == [str(match.id)], timeout=30, what="the orphan's restart")
        assert lcoordination.barriers.is_pending(match.id)
    finally:
        svc.shutdown_all()
        svc.close()
    assert sent.match_ids == [str(match.id)]  # the pending key (then the mark) kept it at one


# -- finding 3: a restart taken by a worker cut from PostgreSQL ---------------------------------


def _cut(service: str = "PostgreSQL"):
    from config.errors import DatabaseUnavailable, RedisUnavailable

    cls = DatabaseUnavailable if service == "PostgreSQL" else RedisUnavailable

    def unreachable(*args, **kwargs):
        raise cls(service=service, setting="X_URL", address="x", reason="cut")

    return unreachable


def _start_of(match, restart, **ctx):
    from lifecycle import guarded_start

    return guarded_start.start_match_listener(
        str(match.id), None, False, message_id=restart.message_id, **ctx
    )


def test_a_restart_a_worker_cut_from_postgresql_gave_up_is_sent_again_by_a_healthy_reaper(
    make_match, lsettings, wide, lcoordination, sent, services, monkeypatch
):
    """The fenced run's match was restarted, the start went to a host cut from PostgreSQL and
    could not give its message back (Redis did not answer either): it freed its pending key, and
    the next reaper step elsewhere restarts it (not the dispatch tick)."""
    from config.errors import DatabaseUnavailable
    from lifecycle import guarded_start

    match = make_match(status="inprogress")
    _closed_row(match, exit_code=int(ExitCode.CANCELLED))
    _epoch_aged(lcoordination, 3600)
    dispatch.dispatch_matches(
        [str(match.id)], settings=lsettings, coordination=lcoordination, send_batch=sent.extend
    )
    [restart] = sent.messages  # the restart the fence's reaper sent
    assert orphans_of_fenced_runs(settings=wide, coordination=lcoordination) == []  # its start is pending

    monkeypatch.setattr(guarded_start, "stored_message_id", _cut())  # (a host cut from PostgreSQL)
    monkeypatch.setattr(lcoordination.barriers, "unconsume_message", _cut("Redis"))  # (and then from Redis)
    with pytest.raises(DatabaseUnavailable):
        _start_of(match, restart, settings=lsettings, coordination=lcoordination, services=services)
    monkeypatch.undo()
    assert not lcoordination.barriers.is_pending(match.id)
    again = orphans_of_fenced_runs(settings=wide, coordination=lcoordination)  # a healthy worker's reaper
    assert again == [str(match.id)]
    dispatch.dispatch_matches(again, settings=lsettings, coordination=lcoordination, send_batch=sent.extend)
    assert sent.match_ids == [str(match.id)] * 2
    assert Match.get_by_id(match.id).start_message_id == sent.messages[1].message_id


# -- findings 6 and 7: a start that meets a service unreachable gives its message back ----------


@pytest.mark.parametrize("where", ["PostgreSQL after the consume", "Redis at the consume"])
def test_a_start_that_cannot_reach_a_service_before_its_lock_gives_its_message_back(
    make_match, lsettings, lcoordination, sent, services, monkeypatch, where
):
    """It raises StartGivenBack (the actor sends the same message again within seconds), keeps the
    pending key (the message still stands for it) and leaves the message unconsumed, so the copy
    runs on a worker that reaches both. Before, a start cut from Redis at its consume died and left
    the pending key and the stored message id of a message nobody would run: no dispatch, reaper
    or sweep restarted the match (finding 7); one cut from PostgreSQL freed the key and left the
    match for a reaper's restart or the dispatch tick (finding 6)."""
    from lifecycle import guarded_start
    from lifecycle.errors import StartGivenBack

    match = make_match(status="inprogress")
    dispatch.dispatch_matches(
        [str(match.id)], settings=lsettings, coordination=lcoordination, send_batch=sent.extend
    )
    [restart] = sent.messages
    services.database.probe_once()
    if where.startswith("PostgreSQL"):
        monkeypatch.setattr(guarded_start, "stored_message_id", _cut())
    else:
        monkeypatch.setattr(lcoordination.barriers, "consume_message", _cut("Redis"))
    with pytest.raises(StartGivenBack):
        _start_of(match, restart, settings=lsettings, coordination=lcoordination, services=services)
    monkeypatch.undo()
    assert lcoordination.barriers.is_pending(match.id)  # kept for the message given back
    assert lcoordination.barriers.consumed_among([restart.message_id]) == set()  # the copy will run
    assert Match.get_by_id(match.id).start_message_id == restart.message_id  # not superseded
    assert services.database.reachable() == where.startswith("Redis")  # cut from PostgreSQL: no starts
    assert lcoordination.barriers.consume_message(
        restart.message_id
    )  # what the copy does first, on another worker


@pytest.mark.parametrize("where", ["its match's read", "its row's write"])
def test_a_run_that_cannot_reach_postgresql_before_its_row_gives_its_message_back(
    make_match, lsettings, lcoordination, sent, services, monkeypatch, where
):
    """A start took its lock, then its run's own first query was refused (a new pool connection
    against a server at its connection limit; finding 11: seed 7's 10-minute run, 62.7 s). Its body
    never ran, yet it was counted as a failed start and nothing sent the match again: it waited for
    the dispatch tick. Now it is given back as a start cut before its lock is: StartGivenBack, not
    counted, its lock freed, its message unconsumed and still the stored one, and this worker
    takes no start until PostgreSQL answers."""
    from lifecycle import listener_run
    from lifecycle.errors import StartGivenBack
    from lifecycle.sql import rows

    match = make_match(status="inprogress")
    dispatch.dispatch_matches(
        [str(match.id)], settings=lsettings, coordination=lcoordination, send_batch=sent.extend
    )
    [restart] = sent.messages
    services.database.probe_once()
    if where == "its match's read":
        monkeypatch.setattr(listener_run, "match_with_league", _cut())
    else:
        monkeypatch.setattr(rows, "create_row", _cut())
    with pytest.raises(StartGivenBack):
        _start_of(match, restart, settings=lsettings, coordination=lcoordination, services=services)
    monkeypatch.undo()
    assert lcoordination.barriers.attempts(match.id) == 0  # not a failed start
    assert lcoordination.locks.start_lock_holder(match.id) is None
    assert lcoordination.barriers.consumed_among([restart.message_id]) == set()  # the copy will run
    assert Match.get_by_id(match.id).start_message_id == restart.message_id
    assert not services.database.reachable()
    assert not MatchListenerRecord.select().where(MatchListenerRecord.match == match.id).exists()
    assert lcoordination.barriers.consume_message(restart.message_id)  # the copy, on another worker


def test_a_revoked_start_is_never_given_back(
    make_match, lsettings, lcoordination, sent, services, monkeypatch
):
    """An operator stop revoked the message: removing a consumed mark never removes a revocation."""
    from config.errors import DatabaseUnavailable

    match = make_match(status="inprogress")
    dispatch.dispatch_matches(
        [str(match.id)], settings=lsettings, coordination=lcoordination, send_batch=sent.extend
    )
    [restart] = sent.messages
    lcoordination.barriers.revoke_message(restart.message_id)
    assert not lcoordination.barriers.unconsume_message(restart.message_id)
    assert lcoordination.barriers.consumed_among([restart.message_id]) == {restart.message_id}
    from lifecycle import guarded_start

    monkeypatch.setattr(guarded_start, "stored_message_id", _cut())
    with pytest.raises(DatabaseUnavailable):  # not consumed here, and not given back
        _start_of(match, restart, settings=lsettings, coordination=lcoordination, services=services)


def test_only_a_start_given_back_is_retried_and_a_bounded_number_of_times():
    from actors.listeners import GIVE_BACK_RETRIES, given_back
    from lifecycle.errors import ListenerRunFailed, StartGivenBack

    assert given_back(0, StartGivenBack("x")) and given_back(GIVE_BACK_RETRIES - 1, StartGivenBack("x"))
    assert not given_back(GIVE_BACK_RETRIES, StartGivenBack("x"))
    assert not given_back(0, ListenerRunFailed("x")) and not given_back(0, RuntimeError("x"))


# -- finding 8: a run refused by PostgreSQL before its first live byte ---------------------------


class DatabaseGoneBody:
    """A body whose first query PostgreSQL refused (the server at its connection limit): no stream."""

    live_first = False

    def __init__(self) -> None:
        self.database_lost = False
        self.exit_reason = ""

    def run(self, ctx: Any) -> int:
        if self.live_first:
            ctx.on_live()
        self.database_lost = True
        self.exit_reason = "DatabaseUnavailable: too many clients already"
        return int(ExitCode.UNEXPECTED_ERROR)

    def request_stop(self) -> None:
        pass


class DatabaseGoneAfterStreamingBody(DatabaseGoneBody):
    live_first = True


@pytest.mark.parametrize("streamed", [False, True], ids=["before its first live byte", "after streaming"])
def test_a_run_refused_by_postgresql_before_it_streamed_is_started_again_at_once(
    make_match, restarting, sent, streamed
):
    """It is counted, this worker takes no start until its probe answers, and the match is sent
    again now (not at the next dispatch tick); a run that had streamed is left to the usual rules."""

    match = make_match(status="inprogress")
    body = "DatabaseGoneAfterStreamingBody" if streamed else "DatabaseGoneBody"
    services = restarting["services"]
    services.database.probe_once()
    result = _start_with_body(match, restarting, body)
    assert result.exit_code == int(ExitCode.UNEXPECTED_ERROR) and result.attempts == 1
    assert sent.match_ids == ([] if streamed else [str(match.id)])
    assert services.database.reachable() == streamed


def test_the_match_listener_says_postgresql_did_not_answer(lsettings, monkeypatch):
    from listener import match_listener
    from listener.body import ListenerContext, body_lost_database

    monkeypatch.setattr(match_listener, "load_match_info", _cut())  # its first query refused
    body = match_listener.MatchListener()
    ctx = ListenerContext(match_id=str(uuid.uuid4()), record_id=None, is_test=False, settings=lsettings)
    assert body.run(ctx) == int(ExitCode.UNEXPECTED_ERROR)
    assert body_lost_database(body) and body.exit_reason.startswith("DatabaseUnavailable")


# -- finding 5: a run that lost its feed gives its match back ---------------------------------


class FeedLostBody:
    """A body that streamed, then lost its feed past LISTENER_FEED_LOST_SECONDS (a host cut from it)."""

    def __init__(self) -> None:
        self.feed_lost = False
        self.exit_reason = ""

    def run(self, ctx: Any) -> int:
        ctx.on_live()
        self.feed_lost = True
        self.exit_reason = "feed lost for 15.2 s: cannot connect: ConnectTimeout"
        return int(ExitCode.CONNECTION_ERROR)

    def request_stop(self) -> None:
        pass


def test_a_run_that_gave_its_match_back_for_a_lost_feed_is_started_again_at_once_elsewhere(
    make_match, restarting, sent
):
    """Whatever its age (not the one-minute rule of a run that ran out of reconnects): counted, this
    worker takes no start until it reaches the feed again, and the match is sent now."""

    match = make_match(status="inprogress")
    services = restarting["services"]
    result = _start_with_body(match, restarting, "FeedLostBody")
    assert result.exit_code == int(ExitCode.CONNECTION_ERROR) and result.attempts == 1
    assert sent.match_ids == [str(match.id)]
    assert not services.feed.reachable() and not services.ready_for_starts()


def test_a_run_that_lost_its_feed_as_redis_restarts_is_sent_again_uncounted(
    make_match, restarting, sent, monkeypatch
):
    """Counting the failed start needs Redis; a count Redis refuses must not keep the match from
    being sent again (chaos seed 62: the private Redis restarting as a host's run lost its feed,
    the start raised there and the match waited 40 s for the dispatch tick)."""
    from config.errors import RedisUnavailable

    def refused(match_id: object) -> int:
        raise RedisUnavailable(service="Redis", setting="REDIS_URL", address="x", reason="restarting")

    monkeypatch.setattr(restarting["coordination"].barriers, "record_failed_attempt", refused)
    match = make_match(status="inprogress")
    result = _start_with_body(match, restarting, "FeedLostBody")
    assert result.exit_code == int(ExitCode.CONNECTION_ERROR) and result.attempts is None
    assert sent.match_ids == [str(match.id)]


#: The two bodies whose run gives its match back, with the exit code and reason its row is closed with.
GIVE_BACK_BODIES = pytest.mark.parametrize(
    ("body", "code", "reason"),
    [
        ("FeedLostBody", ExitCode.CONNECTION_ERROR, "feed lost"),
        ("DatabaseGoneBody", ExitCode.UNEXPECTED_ERROR, "DatabaseUnavailable"),
    ],
    ids=["feed lost", "refused by postgresql"],
)


@GIVE_BACK_BODIES
def test_a_run_that_gave_its_match_back_closes_its_row_once_postgresql_answers_then_sends_the_match(
    make_match, restarting, sent, monkeypatch, body, code, reason
):
    """PostgreSQL refuses the row's close too (the host cut from it, the server at its connection
    limit), and a start would skip a match whose open row has a fresh heartbeat; the give-back
    closes it once PostgreSQL answers, then sends the match."""
    from lifecycle import guarded_start
    from lifecycle.sql import rows

    refusals = [2]
    close_row = rows.close_row

    def refused_twice(*args: Any, **kwargs: Any) -> bool:
        if refusals[0]:
            refusals[0] -= 1
            _cut()()
        return close_row(*args, **kwargs)

    monkeypatch.setattr(rows, "close_row", refused_twice)
    monkeypatch.setattr(guarded_start, "GIVE_BACK_RETRY_SECONDS", 0.01)
    match = make_match(status="inprogress")
    result = _start_with_body(match, restarting, body)
    assert result.exit_code == int(code) and refusals == [0]
    [row] = MatchListenerRecord.select().where(MatchListenerRecord.match == match.id)
    assert row.ended_at is not None and row.exit_code == int(code)
    assert row.exit_reason.startswith(reason)
    assert sent.match_ids == [str(match.id)]


@GIVE_BACK_BODIES
def test_a_row_given_back_on_a_host_cut_from_postgresql_is_closed_by_a_healthy_reaper_and_sent_once(
    make_match, restarting, sent, lcoordination, monkeypatch, body, code, reason
):
    """The run's host stays cut from PostgreSQL, so its own close waits; it marks the row given back,
    a reaper of a worker that reaches PostgreSQL closes it (the run's exit code and reason) and sends
    the match at once, and the run, told so, stops trying: the match is sent once (finding 5)."""
    import threading

    from lifecycle import cleanup, guarded_start
    from lifecycle.sql import rows

    close_row = rows.close_row
    cut_host: list[threading.Thread] = []

    def refused_on_the_cut_host(*args: Any, **kwargs: Any) -> bool:
        if threading.current_thread() in cut_host:
            _cut()()
        return close_row(*args, **kwargs)

    monkeypatch.setattr(rows, "close_row", refused_on_the_cut_host)
    monkeypatch.setattr(guarded_start, "GIVE_BACK_RETRY_SECONDS", 0.05)
    match = make_match(status="inprogress")
    results: list[Any] = []
    run = threading.Thread(target=lambda: results.append(_start_with_body(match, restarting, body)))
    cut_host.append(run)
    run.start()
    [mark] = wait_for(lcoordination.locks.given_back_rows, timeout=30, what="the row marked given back")
    assert (mark.match_id, mark.exit_code) == (str(match.id), int(code)) and mark.reason.startswith(reason)
    [row] = MatchListenerRecord.select().where(MatchListenerRecord.match == match.id)
    assert row.ended_at is None and sent.match_ids == []  # the run's own close is refused
    freed = cleanup.close_given_back_rows(coordination=lcoordination)  # a healthy worker's reaper
    assert freed == [str(match.id)]
    restarting["services"].redispatch(freed)
    run.join(timeout=30)
    assert not run.is_alive() and results[0].exit_code == int(code)
    row = MatchListenerRecord.get_by_id(row.id)
    assert row.exit_code == int(code) and row.exit_reason.startswith(reason)
    assert sent.match_ids == [str(match.id)]
    assert lcoordination.locks.given_back_rows() == []
    assert cleanup.close_given_back_rows(coordination=lcoordination) == []


@pytest.mark.e2e
def test_a_listener_workers_reaper_closes_a_row_given_back_and_runs_its_match_again(
    make_match, lcoordination, start_worker
):
    """What a host cut from PostgreSQL leaves: an open row under a live lease, marked given back. A
    real listener worker's reaper closes it with the run's exit and starts the match again at once."""
    from lifecycle.sql import rows
    from models.coordination import GivenBackRow
    from tests.lifecycle.helpers import open_rows

    match = make_match(status="inprogress")
    lease = f"a-worker-cut-from-postgresql-{uuid.uuid4().hex[:8]}"
    lcoordination.client.set(lcoordination.worker_lease_key(lease), "alive", px=600_000)  # no signal held
    record_id = str(uuid.uuid4())
    rows.create_row(
        record_id=record_id,
        match_id=str(match.id),
        message_id=None,
        dry_run=False,
        worker_lease=lease,
        traceparent=None,
    )
    given = GivenBackRow(record_id, str(match.id), int(ExitCode.CONNECTION_ERROR), "feed lost for 15.2 s")
    assert lcoordination.locks.give_back_row(given, ttl_seconds=120) is False
    start_worker()
    wait_for(
        lambda: MatchListenerRecord.get_by_id(record_id).ended_at is not None,
        timeout=60,
        what="the given-back row closed by the worker's reaper",
    )
    row = MatchListenerRecord.get_by_id(record_id)
    assert (row.exit_code, row.exit_reason) == (int(ExitCode.CONNECTION_ERROR), "feed lost for 15.2 s")
    wait_for(lambda: open_rows(match), timeout=60, what="the match running again")
    assert lcoordination.locks.give_back_row(given, ttl_seconds=120) is True  # a run still trying stops


# -- develop restarts test clones only (issue 38, row 3) ---------------------------------------


def test_in_develop_a_restart_dispatches_the_test_clone_and_leaves_the_live_match(
    make_match, lsettings, lcoordination, sent
):
    """The reaper's, the sweep's, a shutdown's hand-off and a reconnect restart all send through
    dispatch_matches: in develop only is_test matches, as develop's periodic dispatch."""
    from config.settings import AppEnv

    live = make_match(status="inprogress")
    clone = make_match(status="inprogress", is_test=True)
    develop = lsettings.model_copy(update={"app_env": AppEnv.DEVELOP})
    ids = [str(live.id), str(clone.id)]
    dispatch.dispatch_matches(ids, settings=develop, coordination=lcoordination, send_batch=sent.extend)
    assert sent.match_ids == [str(clone.id)]
    assert not lcoordination.barriers.is_pending(live.id)
    staging = lsettings.model_copy(update={"app_env": AppEnv.STAGING})
    dispatch.dispatch_matches(ids, settings=staging, coordination=lcoordination, send_batch=sent.extend)
    assert sent.match_ids == [str(clone.id), str(live.id)]  # elsewhere live matches too


def test_in_develop_a_live_run_that_lost_the_feed_after_streaming_is_not_restarted(
    make_match, restarting, sent
):
    from config.settings import AppEnv

    develop = restarting["settings"].model_copy(update={"app_env": AppEnv.DEVELOP})

    def redispatch(match_ids: list[str]) -> None:
        dispatch.dispatch_matches(
            match_ids, settings=develop, coordination=restarting["coordination"], send_batch=sent.extend
        )

    restarting["services"].redispatch = redispatch
    match = make_match(status="inprogress")
    result = start(match, overrides=_feed_lost_after(1.5), **restarting)
    assert result.exit_code == int(ExitCode.CONNECTION_ERROR)
    assert sent.messages == []
