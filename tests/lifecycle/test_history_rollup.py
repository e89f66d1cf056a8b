"""The history rollup (lifecycle.history) against real PostgreSQL and Redis: derived minutes, snapshots,
catch-up and retention."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from config.clock import utcnow
from lifecycle.history import REDERIVE_MINUTES, rollup_history
from models.db import database
from models.history import add_points, minute_of
from models.listener_record import MatchListenerRecord

#: A fixed "now" in the middle of a minute (where the badges do not matter).
NOW = datetime(2030, 6, 1, 12, 30, 30, tzinfo=UTC)
M = minute_of(NOW)


def _stored(series: str) -> dict[tuple[str, datetime], float]:
    rows = database.execute_sql(
        "SELECT key, minute, value FROM history_points WHERE series = %s", (series,)
    ).fetchall()
    return {(key, minute): value for key, minute, value in rows}


def _run(
    match, now, *, started_ago: float, ended_ago: float | None = None, exit_code: int | None = None
) -> None:
    MatchListenerRecord.create(
        match=match.id,
        created_at=now - timedelta(seconds=started_ago),
        heartbeat_at=now - timedelta(seconds=ended_ago or 0),
        ended_at=None if ended_ago is None else now - timedelta(seconds=ended_ago),
        exit_code=exit_code,
    )


def _outbox_row(queue: str, now: datetime, *, published_ago: float | None) -> None:
    database.execute_sql(
        "INSERT INTO outbox_messages (message_id, queue, body, status, published_at)"
        " VALUES (%s, %s, %s, %s, %s)",
        (
            str(uuid.uuid4()),
            queue,
            json.dumps({}),
            "pending" if published_ago is None else "published",
            None if published_ago is None else now - timedelta(seconds=published_ago),
        ),
    )


def _job_run(job: str, status: str, now: datetime, *, ended_ago: float, seconds: float) -> None:
    database.execute_sql(
        "INSERT INTO run_log (id, job, trigger, dedupe_key, status, ended_at, duration_seconds)"
        " VALUES (%s, %s, 'manual', %s, %s, %s, %s)",
        (str(uuid.uuid4()), job, str(uuid.uuid4()), status, now - timedelta(seconds=ended_ago), seconds),
    )


def test_the_rollup_derives_ends_takeovers_publishes_and_job_runs_and_snapshots_badges_and_depth(
    lsettings, lcoordination, make_match
):
    # real time: the badges are judged by PostgreSQL's clock, as the board judges them
    now = utcnow()
    at = lambda seconds_ago: minute_of(now - timedelta(seconds=seconds_ago))  # noqa: E731
    stale = lsettings.listener_heartbeat_stale_seconds
    a, b, c = make_match(), make_match(), make_match()
    _run(a, now, started_ago=600, ended_ago=130, exit_code=14)  # abandoned...
    _run(a, now, started_ago=125)  # ...and taken over by a run that heartbeats now: Running
    _run(b, now, started_ago=400, ended_ago=125, exit_code=12)  # a failure
    _run(b, now, started_ago=100, ended_ago=62, exit_code=0)  # a graceful end, then no takeover
    _run(c, now, started_ago=stale + 300, ended_ago=None)
    MatchListenerRecord.update(heartbeat_at=now - timedelta(seconds=stale + 60)).where(
        MatchListenerRecord.match == c.id
    ).execute()  # c's worker died: Stale
    _outbox_row("lineup_updates", now, published_ago=65)
    _outbox_row("lineup_updates", now, published_ago=70)
    _outbox_row("waiver_actions", now, published_ago=None)
    _job_run("noop", "succeeded", now, ended_ago=61, seconds=2.0)
    _job_run("noop", "succeeded", now, ended_ago=61, seconds=4.0)
    _job_run("noop", "failed", now, ended_ago=61, seconds=1.0)
    queues = ["lineup_updates", "waiver_actions"]
    result = rollup_history(settings=lsettings, coordination=lcoordination, queues=queues, now=now)
    ends: dict = {}
    for key, seconds_ago in (("Abandoned", 130), ("Failed", 125), ("Ended", 62)):
        ends[(key, at(seconds_ago))] = ends.get((key, at(seconds_ago)), 0) + 1
    assert _stored("listener_ends") == ends
    assert _stored("takeovers") == {("", at(125)): 1}
    published: dict = {}
    for seconds_ago in (65, 70):
        published[("lineup_updates", at(seconds_ago))] = (
            published.get(("lineup_updates", at(seconds_ago)), 0) + 1
        )
    assert _stored("outbox_published") == published
    assert _stored("outbox_depth") == {("lineup_updates", at(0)): 0, ("waiver_actions", at(0)): 1}
    assert _stored("job_runs") == {("noop succeeded", at(61)): 2, ("noop failed", at(61)): 1}
    assert _stored("job_run_seconds") == {("noop", at(61)): pytest.approx(7.0 / 3)}
    assert _stored("listeners") == {("Running", at(0)): 1, ("Late", at(0)): 0, ("Stale", at(0)): 1}
    assert result.snapshot_points == 5
    again = rollup_history(settings=lsettings, coordination=lcoordination, queues=queues, now=now)
    assert again.derived_points == result.derived_points  # the same minutes derived again, not added
    assert _stored("job_runs") == {("noop succeeded", at(61)): 2, ("noop failed", at(61)): 1}


def test_the_rollup_derives_again_from_its_previous_minute_so_a_missed_tick_is_filled_in(
    lsettings, lcoordination, make_match
):
    rollup_history(settings=lsettings, coordination=lcoordination, queues=[], now=NOW - timedelta(minutes=40))
    _job_run("noop", "succeeded", NOW, ended_ago=30 * 60, seconds=1.0)  # ended while no rollup ran
    result = rollup_history(settings=lsettings, coordination=lcoordination, queues=[], now=NOW)
    assert result.derived_from == (M - timedelta(minutes=40 + REDERIVE_MINUTES)).isoformat()
    assert _stored("job_runs") == {("noop succeeded", minute_of(NOW - timedelta(minutes=30))): 1}


def test_the_rollup_prunes_what_is_older_than_the_retention(lsettings, lcoordination, db):
    add_points({("events", "m", M - timedelta(minutes=lsettings.history_retention_days * 1440 + 5)): 1})
    result = rollup_history(settings=lsettings, coordination=lcoordination, queues=[], now=NOW)
    assert result.pruned == 1 and _stored("events") == {}
