"""A run whose event log writing is behind shows as degraded on both boards, and stops showing it once it
caught up (or once it stopped beating): the run's heartbeat keeps its flag in Redis, the boards read it.

Real PostgreSQL (the event log's writer, the boards' query) and Redis (the flag); the run is made
degraded by a pipelined ingest whose in-flight bound is one message and whose processing is held, or
by its writer's PostgreSQL going away (a fault proxy) while another process reads the board.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.faultproxy import FaultProxy
from lifecycle.board import BoardCache, listener_board
from lifecycle.heartbeat import DEGRADED_FLAG_INTERVALS, HeartbeatRegistration, HeartbeatService
from lifecycle.matches_board import window_entries
from lifecycle.sql import rows
from listener.event_log import EventLog
from listener.ingest import PipelinedIngest
from listener.log_writer import LogWriter
from models.badges import Badge
from models.db import database, init_database
from tests import intervals
from tests.waiting import wait_for

pytestmark = pytest.mark.services


def _atbat(event_id: str) -> dict:
    return {"payload": {"event": {"type": "atbat", "id": event_id}}, "metadata": {"operation": "create"}}


class HeldRun:
    """One open run of ``match`` with a pipelined ingest bounded at one message in flight, whose
    processing waits for ``release``; beaten by a real heartbeat service that reads its ``degraded``."""

    def __init__(self, match, coordination, *, interval_seconds: float) -> None:
        self.match_id = str(match.id)
        self.record_id = str(uuid.uuid4())
        token = rows.create_row(
            record_id=self.record_id, match_id=self.match_id, message_id=None, dry_run=False
        )
        log = EventLog(
            match_id=self.match_id,
            writer=LogWriter(buffer_limit=100, retry_seconds=0.05),
            record_id=self.record_id,
            fence_token=token,
        ).open()
        self.release = threading.Event()
        self.pool = ThreadPoolExecutor(1)
        self.ingest = PipelinedIngest(
            log,
            lambda _messages, _keys: self.release.wait(30),
            pool=self.pool,
            limit=1,
            stop=threading.Event(),
        )
        self.lost: list[str] = []
        coordination.locks.start_lock(match.id).acquire(self.record_id)
        self.heartbeat = HeartbeatService(
            coordination=coordination,
            interval_seconds=interval_seconds,
            lock_ttl_seconds=3600,
            grace_seconds=0,
        )
        self.registration = HeartbeatRegistration(
            self.match_id,
            self.record_id,
            self.record_id,
            on_lost=self.lost.append,
            degraded=lambda: self.ingest.degraded,
        )
        self.heartbeat.register(self.registration)

    def close(self) -> None:
        self.release.set()
        self.heartbeat.stop()
        self.pool.shutdown(wait=True)


@pytest.fixture
def lsettings(lsettings):
    """Production thresholds (Late after 60 s): a run beaten by hand stays Running however slow the box."""
    return lsettings.model_copy(update=intervals.fields("production"))


@pytest.fixture
def held_run(make_match, lcoordination) -> Iterator:
    runs: list[HeldRun] = []

    def make(match, *, interval_seconds: float = 600.0) -> HeldRun:
        run = HeldRun(match, lcoordination, interval_seconds=interval_seconds)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.close()


def _entries(match, lsettings, lcoordination, cache: BoardCache) -> list:
    """The match's entry as every board reader builds it: one match, the full board (fresh and through a
    live board's cache) and the Matches board's window."""
    mid = str(match.id)
    day = datetime.now(UTC).date()
    window, _ = window_entries(day, day, settings=lsettings, coordination=lcoordination)
    return [
        *listener_board(settings=lsettings, coordination=lcoordination, match_id=mid),
        *(e for e in listener_board(settings=lsettings, coordination=lcoordination) if e.match_id == mid),
        *(
            e
            for e in listener_board(settings=lsettings, coordination=lcoordination, cache=cache)
            if e.match_id == mid
        ),
        *(e for e in window if e.match_id == mid),
    ]


def test_a_run_behind_shows_degraded_on_both_boards_until_it_caught_up(
    make_match, lsettings, lcoordination, held_run
):
    match = make_match("mlb", status="inprogress", scheduled=datetime.now(UTC))
    healthy = make_match("mlb", status="inprogress", scheduled=datetime.now(UTC))
    run, other = held_run(match), held_run(healthy)
    cache = BoardCache()
    key = lcoordination.degraded_key(run.record_id)

    run.heartbeat.beat_once()
    assert [e.degraded for e in _entries(match, lsettings, lcoordination, cache)] == [False] * 4

    assert run.ingest.take(_atbat("e1"))  # one message in flight, its processing held: the bound
    assert run.ingest.degraded and not other.ingest.degraded
    run.heartbeat.beat_once()
    other.heartbeat.beat_once()
    entries = _entries(match, lsettings, lcoordination, cache)
    assert len(entries) == 4 and all(e.degraded and e.badge == Badge.RUNNING.value for e in entries)
    assert entries[0].as_dict()["degraded"] is True  # the JSON of `listeners status --json` and the API
    assert not any(e.degraded for e in _entries(healthy, lsettings, lcoordination, cache))
    assert 0 < lcoordination.client.pttl(key) <= DEGRADED_FLAG_INTERVALS * 600 * 1000

    run.release.set()  # processing goes on: nothing in flight any more
    assert run.ingest.drain(30) and not run.ingest.degraded
    assert [e.degraded for e in _entries(match, lsettings, lcoordination, cache)] == [
        True
    ] * 4  # until a beat
    run.heartbeat.beat_once()
    assert [e.degraded for e in _entries(match, lsettings, lcoordination, cache)] == [False] * 4
    assert lcoordination.client.exists(key) == 0 and run.lost == [] and other.lost == []


def test_a_closed_run_never_shows_degraded_whatever_its_flag(make_match, lsettings, lcoordination, held_run):
    match = make_match("mlb", status="inprogress", scheduled=datetime.now(UTC))
    run = held_run(match)
    assert run.ingest.take(_atbat("e1"))
    run.heartbeat.beat_once()
    assert listener_board(settings=lsettings, coordination=lcoordination, match_id=str(match.id))[0].degraded
    rows.close_row(run.record_id, exit_code=0, reason="game over")
    assert lcoordination.client.exists(lcoordination.degraded_key(run.record_id)) == 1  # left to its TTL
    assert not listener_board(settings=lsettings, coordination=lcoordination, match_id=str(match.id))[
        0
    ].degraded


def test_a_degraded_run_that_stops_beating_stops_showing_degraded_after_a_few_intervals(
    make_match, lsettings, lcoordination, held_run
):
    match = make_match("mlb", status="inprogress", scheduled=datetime.now(UTC))
    run = held_run(match, interval_seconds=0.5)
    assert run.ingest.take(_atbat("e1"))
    wait_for(
        lambda: (
            listener_board(settings=lsettings, coordination=lcoordination, match_id=str(match.id))[0].degraded
        )
    )
    run.heartbeat.unregister(run.registration)  # its process hangs or died: no beat sets the flag again
    assert run.ingest.degraded  # still behind, but nobody says so any more
    wait_for(
        lambda: (
            not listener_board(settings=lsettings, coordination=lcoordination, match_id=str(match.id))[
                0
            ].degraded
        ),
        timeout=30,
    )


def _board_of_another_process(env: dict[str, str], match_id: str) -> dict:
    """``kickoff listeners status --match MATCH_ID --json`` as its own process (direct to PostgreSQL)."""
    kickoff = str(Path(sys.executable).with_name("kickoff"))
    done = subprocess.run(
        [kickoff, "listeners", "status", "--match", match_id, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    [entry] = json.loads(done.stdout)["matches"]
    return entry


def test_a_run_whose_postgresql_is_away_shows_degraded_on_another_processs_board_until_it_is_back(
    make_match, settings, lcoordination, subprocess_env, lifecycle_env
):
    # The listener's process reaches PostgreSQL through a fault proxy; the board's process does not.
    match = make_match("mlb", status="inprogress", scheduled=datetime.now(UTC))
    record_id = str(uuid.uuid4())
    token = rows.create_row(record_id=record_id, match_id=str(match.id), message_id=None, dry_run=False)
    env = {**subprocess_env, **lifecycle_env}
    proxy = FaultProxy(("127.0.0.1", 5432)).start()
    init_database(
        proxy.url_via(settings.database_url),
        connect_timeout_seconds=2,
        statement_timeout_seconds=settings.database_statement_timeout_seconds,
    )
    heartbeat = HeartbeatService(
        coordination=lcoordination, interval_seconds=60, lock_ttl_seconds=3600, grace_seconds=0
    )
    pool = ThreadPoolExecutor(1)
    try:
        log = EventLog(
            match_id=str(match.id),
            writer=LogWriter(buffer_limit=1000, retry_seconds=0.05),
            record_id=record_id,
            fence_token=token,
        ).open()
        ingest = PipelinedIngest(
            log, lambda _messages, _keys: None, pool=pool, limit=1000, stop=threading.Event()
        )
        lcoordination.locks.start_lock(match.id).acquire(record_id)
        lost: list[str] = []
        heartbeat.register(
            HeartbeatRegistration(
                str(match.id), record_id, record_id, on_lost=lost.append, degraded=lambda: ingest.degraded
            )
        )
        heartbeat.beat_once()
        assert _board_of_another_process(env, str(match.id))["degraded"] is False

        database.close()
        proxy.refuse()  # PostgreSQL away from the listener's host
        assert ingest.take(_atbat("e1"))
        wait_for(lambda: ingest.degraded, what="the writer holds the message: PostgreSQL is away")
        heartbeat.beat_once()  # the row's heartbeat cannot be written; the flag in Redis can
        entry = _board_of_another_process(env, str(match.id))
        assert entry["degraded"] is True and entry["record_id"] == record_id

        proxy.forward()
        assert ingest.drain(30)
        wait_for(lambda: not ingest.degraded, timeout=30, what="the writer caught up")
        heartbeat.beat_once()
        assert _board_of_another_process(env, str(match.id))["degraded"] is False
        assert lost == []
    finally:
        proxy.forward()
        heartbeat.stop()
        pool.shutdown(wait=True)
        init_database(
            settings.database_url,
            connect_timeout_seconds=settings.database_connect_timeout_seconds,
            statement_timeout_seconds=settings.database_statement_timeout_seconds,
        )
        proxy.stop()
