"""The fence watch (lifecycle.fence_watch, docs/reliability.md finding 10): while a worker's liveness
signal is gone, its runs read PostgreSQL every poll and stop at once once taken over.

A host refused by Redis loses its signal at once and peers take its matches over within the grace;
its runs must not stream on until their next write meets the fence. The unit tests drive the watch's
step with a fake read; the service tests read real rows, and run real in-process runs whose Redis
goes through a proxy that refuses it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import pytest

from config.errors import DatabaseUnavailable, RedisUnavailable
from config.settings import MatchListenerEnvironment
from harness.faultproxy import FaultProxy
from lifecycle import fence_watch
from lifecycle.fence_watch import FenceWatch
from lifecycle.heartbeat import FENCED, ROW_CLOSED_ELSEWHERE, HeartbeatRegistration
from lifecycle.runtime import ListenerServices
from lifecycle.sql import rows
from lifecycle.takeover import WORKER_DIED
from models.coordination import CoordinationStore
from tests.lifecycle.helpers import open_rows, rows_of, start
from tests.waiting import wait_for

#: Generous: the watch polls every 0.05 s; the suite's box is loaded.
WAIT_SECONDS = 30.0


class _Rows:
    """A fake ``rows.superseded_rows``: answers ``answer`` and counts the ids it was asked for."""

    def __init__(self) -> None:
        self.answer: dict[str, bool] = {}
        self.asked: list[list[str]] = []
        self.fail = False

    def __call__(self, record_ids: Sequence[str]) -> dict[str, bool]:
        self.asked.append(list(record_ids))
        if self.fail:
            raise DatabaseUnavailable(
                service="PostgreSQL", setting="DATABASE_URL", address="db", reason="cut"
            )
        return {r: f for r, f in self.answer.items() if r in record_ids}


def _reg(record_id: str | None, told: list[tuple[str, str]]) -> HeartbeatRegistration:
    match_id = f"m-{record_id}"
    return HeartbeatRegistration(
        match_id, "t", record_id, on_lost=lambda reason: told.append((match_id, reason))
    )


def _watch(lost: list[bool], regs: list[HeartbeatRegistration], read: _Rows) -> FenceWatch:
    return FenceWatch(signal_lost=lambda: lost[0], runs=lambda: list(regs), read=read)


def test_nothing_is_read_while_the_signal_is_held():
    told: list[tuple[str, str]] = []
    read = _Rows()
    read.answer = {"old": True}
    watch = _watch([False], [_reg("old", told)], read)
    for _ in range(5):
        assert watch.poll_once() == []
    assert read.asked == [] and told == [] and watch.polls == 0 and watch.steps == 5


def test_while_the_signal_is_gone_one_read_for_all_runs_stops_those_taken_over_and_only_them():
    told: list[tuple[str, str]] = []
    read = _Rows()
    lost = [True]
    regs = [_reg("fenced", told), _reg("closed", told), _reg("current", told), _reg(None, told)]
    watch = _watch(lost, regs, read)
    assert watch.poll_once() == []  # nobody taken over yet
    assert [sorted(ids) for ids in read.asked] == [["closed", "current", "fenced"]]  # one read, rows only
    read.answer = {"fenced": True, "closed": False}
    assert sorted(watch.poll_once()) == ["m-closed", "m-fenced"]
    assert sorted(told) == [("m-closed", ROW_CLOSED_ELSEWHERE), ("m-fenced", FENCED)]
    # The runs told stay registered until they end: they are not read (nor told) again.
    watch.poll_once()
    assert read.asked[-1] == ["current"] and len(told) == 2
    # The signal held again: no read any more.
    lost[0] = False
    asked = len(read.asked)
    watch.poll_once()
    assert len(read.asked) == asked


def test_a_failed_read_waits_before_the_next(monkeypatch):
    told: list[tuple[str, str]] = []
    read = _Rows()
    read.fail = True
    watch = _watch([True], [_reg("r", told)], read)
    assert watch.poll_once() == [] and len(read.asked) == 1
    assert watch.poll_once() == [] and len(read.asked) == 1  # within FAILURE_PAUSE_SECONDS: no read
    monkeypatch.setattr(fence_watch, "FAILURE_PAUSE_SECONDS", 0.0)
    watch._next_after_failure = 0.0
    read.fail = False
    read.answer = {"r": True}
    assert watch.poll_once() == ["m-r"] and told == [("m-r", FENCED)]


# -- real rows -----------------------------------------------------------------------------


def _new_row(match: Any) -> str:
    record_id = str(uuid.uuid4())
    rows.create_row(record_id=record_id, match_id=str(match.id), message_id=None, dry_run=False)
    return record_id


def test_superseded_rows_names_the_fenced_and_the_closed_rows_in_one_query(make_match):
    fenced_match, closed_match = make_match(), make_match()
    old = _new_row(fenced_match)
    new = _new_row(fenced_match)  # a successor took the next token
    closed = _new_row(closed_match)
    assert rows.close_row(closed, exit_code=14, reason=WORKER_DIED)
    assert rows.superseded_rows([old, new, closed]) == {old: True, closed: False}
    assert rows.superseded_rows([]) == {}


def _assert_nothing_read_while_held(watch: FenceWatch) -> None:
    """With the signal seen held: once a step began after that (its thread's steps run one at a time),
    five more steps read nothing."""
    steps = watch.steps
    wait_for(lambda: watch.steps >= steps + 2, timeout=WAIT_SECONDS)
    polls, steps = watch.polls, watch.steps
    wait_for(lambda: watch.steps >= steps + 5, timeout=WAIT_SECONDS)
    assert watch.polls == polls


@pytest.mark.services  # a proxy of its own in front of Redis
def test_a_run_cut_from_redis_stops_within_a_poll_once_taken_over_and_one_still_current_does_not(
    make_match, lifecycle_env, runner, caplog
):
    # Leases, locks, rows and heartbeats judged by minutes: only the fence watch can stop a run within
    # the test's waits (the heartbeat's first beat, which would find the fence too, comes after 60 s).
    caplog.set_level(logging.INFO, logger="lifecycle.listener_run")
    base = MatchListenerEnvironment(_env_file=None)
    redis = urlsplit(base.redis_url)
    with FaultProxy((redis.hostname or "127.0.0.1", redis.port or 6379)) as proxy:
        settings = MatchListenerEnvironment(
            _env_file=None,
            redis_url=proxy.url_via(base.redis_url),
            listener_heartbeat_interval_seconds=60,
            listener_heartbeat_stale_seconds=180,
            listener_lock_loss_grace_seconds=30,
            listener_worker_lease_seconds=180,
        )
        coordination = CoordinationStore.from_settings(settings)
        services = ListenerServices(settings=settings, coordination=coordination)
        fenced, closed, current = make_match(), make_match(), make_match()
        try:
            runs = {
                m.id: runner(start, m, settings=settings, coordination=coordination, services=services)
                for m in (fenced, closed, current)
            }
            ids = {
                m.id: wait_for(lambda m=m: open_rows(m), timeout=WAIT_SECONDS)[0].id
                for m in (fenced, closed, current)
            }
            wait_for(services.liveness.held, timeout=WAIT_SECONDS, what="the signal held")
            _assert_nothing_read_while_held(services.fence_watch)  # (runs started before it was: read)

            proxy.refuse()  # the host is refused by Redis: every connection reset, none accepted
            wait_for(lambda: not services.liveness.held(), timeout=WAIT_SECONDS, what="the signal gone")
            # A peer takes two matches over: one by a successor's token, one by a reaper's abandon.
            _new_row(fenced)
            assert rows.close_row(str(ids[closed.id]), exit_code=14, reason=WORKER_DIED)

            # The heartbeat's fence refusal: exit 16. (Its start then counts a failed attempt, in Redis:
            # refused here, so the start raises; as it does after a write the fence refused.)
            wait_for(runs[fenced.id].done, timeout=WAIT_SECONDS, what="the fenced run ended")
            assert isinstance(runs[fenced.id].exception(), (type(None), RedisUnavailable))
            assert f"match {fenced.id}: listener ended with exit 16 ({FENCED})" in caplog.messages
            result = runs[closed.id].result(timeout=WAIT_SECONDS)
            assert (result.exit_code, result.reason) == (14, WORKER_DIED)  # the reaper's close stands
            polls = services.fence_watch.polls
            wait_for(lambda: services.fence_watch.polls >= polls + 5, timeout=WAIT_SECONDS)
            assert not runs[current.id].done()  # its token is current: it streams on
            assert [r.id for r in open_rows(current)] == [ids[current.id]]
            assert rows_of(fenced)[0].ended_at is None  # a fenced run cannot close its row (the sweep does)

            proxy.forward()
            wait_for(services.liveness.held, timeout=WAIT_SECONDS, what="the signal held again")
            _assert_nothing_read_while_held(services.fence_watch)
        finally:
            services.shutdown_all()
            services.close()
