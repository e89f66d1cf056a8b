"""Small helpers shared by the lifecycle tests."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from config.clock import utcnow
from config.periodic import PeriodicThread
from harness.background import BackgroundLoop
from lifecycle import guarded_start
from lifecycle.dispatch import dispatch_upcoming_match_listeners
from lifecycle.sql.rows import db_now
from models.db import database
from models.listener_record import MatchListenerRecord
from models.match import Match
from srsim.script import GameScript


def add_match_args(
    sr_id: str, *extra: str, league: str = "nfl", scheduled: str = "2030-01-01T18:00:00Z"
) -> list[str]:
    """The arguments of `kickoff matches add` for match ``sr_id`` of ``league``, then ``extra``."""
    return ["matches", "add", "--league", league, "--sr-id", sr_id, "--scheduled", scheduled, *extra]


#: The fields of one listener board entry (`kickoff listeners status --json`).
BOARD_ENTRY_KEYS = {
    "match_id",
    "league",
    "sr_id",
    "match_status",
    "badge",
    "record_id",
    "heartbeat_age_s",
    "attempts",
    "exhausted",
    "pending",
    "auto_dispatch",
    "exit_code",
    "reason",
    "host",
    "pid",
    "gaps",
    "gap_seconds",
    "events_backfilled",
    "gaps_unrecovered",
    "events_unrecovered",
    "archive_ok",
    "archive_missing",
    "archive_extra",
    "archive_differing",
    "archive_verified_at",
    "title",
    "scheduled",
    "run_started_at",
    "takeover",
    "degraded",
}


def rows_of(match: Any) -> list[MatchListenerRecord]:
    """Lifecycle rows of a match, oldest first."""
    return list(
        MatchListenerRecord.select()
        .where(MatchListenerRecord.match == match.id)
        .order_by(MatchListenerRecord.created_at)
    )


def open_rows(match: Any) -> list[MatchListenerRecord]:
    return [r for r in rows_of(match) if r.ended_at is None]


def reload(match: Any) -> Match:
    return Match.get_by_id(match.id)


def dead_run(match: Any, coordination: Any, *, age_seconds: float = 600.0, hold_lock: bool = True) -> str:
    """A hard-killed listener: an open row with an old heartbeat, its lock (if still held) and pending."""
    record_id = str(uuid.uuid4())
    past = utcnow() - timedelta(seconds=age_seconds)
    MatchListenerRecord.create(id=record_id, match=match.id, created_at=past, heartbeat_at=past)
    if hold_lock:
        coordination.locks.start_lock(match.id).acquire(record_id)
    coordination.barriers.claim_pending(match.id)
    return record_id


def poisoned_and_good_runs(make_match, coordination, redis_client, *, good: int = 3):
    """The oldest dead run's start lock key holds a hash (WRONGTYPE for every string command); then
    ``good`` ordinary dead runs, each with its lock, pending key and failed attempts."""
    poisoned = make_match(status="inprogress")
    poisoned_row = dead_run(poisoned, coordination, age_seconds=900, hold_lock=False)
    redis_client.hset(coordination.start_lock_key(poisoned.id), "token", poisoned_row)
    goods = []
    for _ in range(good):
        match = make_match(status="inprogress")
        dead_run(match, coordination, age_seconds=600)
        coordination.barriers.record_failed_attempt(match.id)
        goods.append(match)
    return poisoned, poisoned_row, goods


def live_row(match: Any) -> str:
    """An open row with a fresh heartbeat (a listener elsewhere that looks alive)."""
    record_id = str(uuid.uuid4())
    MatchListenerRecord.create(id=record_id, match=match.id)
    return record_id


@contextlib.contextmanager
def beating_row(match: Any, *, every: float = 0.2) -> Iterator[str]:
    """An open row whose heartbeat is kept fresh while the block runs (a live listener elsewhere).

    A bare ``live_row`` goes stale after LISTENER_HEARTBEAT_STALE_SECONDS (1.5 s in these
    tests): a worker that boots slower than that would rightly abandon it.
    """
    record_id = live_row(match)

    def beat() -> None:
        MatchListenerRecord.update(heartbeat_at=db_now()).where(MatchListenerRecord.id == record_id).execute()

    beater = PeriodicThread(beat, interval=every, name="test-beating-row", on_exit=database.close)
    beater.start()
    try:
        yield record_id
    finally:
        beater.stop(join_seconds=10)


def start(
    match: Any, *, settings: Any, coordination: Any, services: Any, **kw: Any
) -> guarded_start.StartResult:
    """Call the start the actor calls, in-process."""
    return guarded_start.start_match_listener(
        str(match.id),
        kw.pop("overrides", None),
        kw.pop("force", False),
        message_id=kw.pop("message_id", None),
        settings=settings,
        coordination=coordination,
        services=services,
        handoff=kw.pop("handoff", False),
    )


def dispatch(*, settings: Any, coordination: Any, send: Any, **kw: Any):
    return dispatch_upcoming_match_listeners(settings=settings, coordination=coordination, send=send, **kw)


def quick(**settings: Any) -> dict[str, Any]:
    """listener_start_settings for a scripted run that ends at once with ``exit``."""
    return {"listener_test_duration_seconds": 0, **settings}


class OpenRowMonitor(BackgroundLoop):
    """Samples every 20 ms the largest number of open lifecycle rows any one of ``match_ids`` has."""

    def __init__(self, match_ids) -> None:
        super().__init__()
        self.match_ids = list(match_ids)
        self.max_open = 0

    def step(self) -> None:
        row = database.execute_sql(
            "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM match_listener_records "
            "WHERE ended_at IS NULL AND match_id = ANY(%s::uuid[]) GROUP BY match_id) c",
            ([str(m) for m in self.match_ids],),
        ).fetchone()
        self.max_open = max(self.max_open, int(row[0]))


def dispatch_now(ctx: dict[str, Any], send: Any) -> Any:
    """One dispatch tick with ``ctx``'s settings and coordination; its thread's connection closed after."""
    try:
        return dispatch_upcoming_match_listeners(
            settings=ctx["settings"], coordination=ctx["coordination"], send=send
        )
    finally:
        database.close()


def enqueue_forced_start(kick: Any, match_ref: object, *more: str) -> Any:
    """``kickoff enqueue start_match_listener`` of ``match_ref`` (id or sr_id), forced, reason "drill"."""
    return kick(
        "enqueue",
        "start_match_listener",
        "--kw",
        f"match_id={match_ref}",
        "--kw",
        "force=true",
        "--reason",
        "drill",
        *more,
    )


def mlb_games(n: int, *, events: int, interval: float) -> list[GameScript]:
    """``n`` live mlb games for real-worker tests: ``events`` events ``interval`` s apart, with
    3 corrections and 2 deletes each (what the archive's comparison with the feed must get right)."""
    return [
        GameScript(
            sr_id=str(uuid.uuid4()),
            league="mlb",
            is_test=False,
            start_after=3.0,
            event_interval=interval,
            event_count=events,
            corrections=3,
            deletes=2,
        )
        for _ in range(n)
    ]


def written_after_successor(match: Any, run: Any, successor: Any) -> int:
    """Messages ``run`` logged into the match's event log after ``successor``'s first one (fenced: 0)."""
    from models.db import database

    (n,) = database.execute_sql(
        "SELECT count(*) FROM match_events WHERE match_id = %s AND record_id = %s AND arrived_at > "
        "(SELECT min(arrived_at) FROM match_events WHERE match_id = %s AND record_id = %s)",
        (str(match.id), str(run.id), str(match.id), str(successor.id)),
    ).fetchone()
    return int(n)
