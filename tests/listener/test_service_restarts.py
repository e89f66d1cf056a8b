"""Services restarting under live listeners: Redis restarted empty, PostgreSQL going away, the broker's Redis.

Every fault is private to the test: a redis-server of its own (harness.private_redis) or a TCP
fault proxy in front of the shared PostgreSQL (harness.faultproxy). The shared services are never
stopped. Listeners run the real MatchListener against srsim.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.faultproxy import FaultProxy
from harness.private_redis import PrivateRedis
from lifecycle import guarded_start
from lifecycle.cleanup import reap_dead_workers
from lifecycle.dispatch import dispatch_upcoming_match_listeners
from lifecycle.heartbeat import ROW_UNWRITABLE
from lifecycle.runtime import ListenerServices
from listener import log_writer
from models.coordination import CoordinationStore
from models.db import database, init_database
from models.event_log import log_summary
from models.listener_record import MatchListenerRecord
from models.match import Match
from srsim.script import GameScript
from tests import intervals
from tests.lifecycle.helpers import OpenRowMonitor
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


#: Listener intervals short enough for a test to see heartbeats, stops and lost locks happen.
QUICK_INTERVALS = intervals.fields("service_restarts")


class Runs:
    """Listener starts running in background threads; their StartResults (or exceptions) kept."""

    def __init__(self, *, settings, coordination, services) -> None:
        self.kw = {"settings": settings, "coordination": coordination, "services": services}
        self.results: dict[str, Any] = {}
        self.threads: dict[str, threading.Thread] = {}

    def start(self, match_id: str) -> None:
        def run() -> None:
            try:
                self.results[match_id] = guarded_start.start_match_listener(
                    match_id, None, False, message_id=None, **self.kw
                )
            except Exception as exc:  # recorded for the test to inspect
                self.results[match_id] = exc
            finally:
                if not database.is_closed():
                    database.close()

        self.threads[match_id] = threading.Thread(target=run, daemon=True)
        self.threads[match_id].start()

    def alive(self) -> bool:
        return all(t.is_alive() for t in self.threads.values())

    def join(self, timeout: float) -> None:
        for t in self.threads.values():
            t.join(timeout)


def _games(n: int) -> list[GameScript]:
    # About a minute of events, ten a second: the game outlives every fault below.
    return [
        GameScript(
            sr_id=str(uuid.uuid4()), league="mlb", start_after=0.0, event_interval=0.1, event_count=600
        )
        for _ in range(n)
    ]


def _matches(make_match, server, games, tmp_path: Path, monkeypatch: Any) -> list[Any]:
    # The feed and the data directory are the worker's environment; the run's own knobs are stored.
    monkeypatch.setenv("SPORTRADAR_BASE_URL", server.base_url)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    start_settings = {
        "listener_archive_flush_seconds": 0.0,
        "listener_status_reload_heartbeats": 1000,
    }
    return [
        make_match("mlb", sr_id=g.sr_id, status="inprogress", listener_start_settings=start_settings)
        for g in games
    ]


def _events(tmp_path: Path, game: GameScript) -> int:
    """Messages of the game in its event log (PostgreSQL)."""
    return log_summary(Match.get(Match.sr_id == game.sr_id).id).events


def _held() -> int:
    """Messages this process's event log writer holds, not written yet (PostgreSQL away)."""
    return log_writer._writer.waiting if log_writer._writer is not None else 0


def _open_rows(match_ids) -> list[MatchListenerRecord]:
    R = MatchListenerRecord
    return list(R.select().where(R.match.in_(list(match_ids)), R.ended_at.is_null()))


def test_redis_restarted_empty_mid_game_keeps_every_listener_and_starts_no_second_one(
    sim, make_match, settings, tmp_path, monkeypatch
):
    games = _games(2)
    server = sim(games, write_status=False)
    matches = _matches(make_match, server, games, tmp_path, monkeypatch)
    ids = [str(m.id) for m in matches]
    with PrivateRedis(tmp_path / "redis") as private:
        lsettings = settings.model_copy(
            update={
                "redis_url": private.url(),
                **QUICK_INTERVALS,
                "listener_heartbeat_stale_seconds": 10.0,
                "listener_worker_lease_seconds": 4.0,
            }
        )
        coordination = CoordinationStore.from_settings(lsettings)
        restarted: list[list[str]] = []
        services = ListenerServices(
            settings=lsettings,
            coordination=coordination,
            reap=lambda: [
                r.match_id for r in reap_dead_workers(settings=lsettings, coordination=coordination)
            ],
            redispatch=restarted.append,
        )
        services.start()
        runs = Runs(settings=lsettings, coordination=coordination, services=services)
        try:
            with OpenRowMonitor(ids) as monitor:
                for mid in ids:
                    runs.start(mid)
                tokens = {
                    str(r.match_id): str(r.id)
                    for r in wait_for(lambda: len(_open_rows(ids)) == 2 and _open_rows(ids))
                }
                wait_for(lambda: all(_events(tmp_path, g) > 0 for g in games))

                private.restart(down_seconds=0.5)  # every lock, lease and pending key is gone
                sent: list[Any] = []
                after = dispatch_upcoming_match_listeners(
                    settings=lsettings, coordination=coordination, send=sent.append
                )
                assert after.enqueued == 0 and sent == []  # fresh heartbeats: no second listener
                blocked = guarded_start.start_match_listener(
                    ids[0],
                    None,
                    False,
                    message_id=None,
                    settings=lsettings,
                    coordination=coordination,
                    services=services,
                )
                assert blocked.skipped is not None  # the start guard sees the live row

                # The running listeners take their locks again and renew a re-created lease.
                def relocked() -> bool:
                    held = [coordination.client.get(coordination.start_lock_key(m)) for m in ids]
                    return held == [tokens[m].encode() for m in ids]

                wait_for(relocked, timeout=30)
                before = {g.sr_id: _events(tmp_path, g) for g in games}
                wait_for(lambda: all(_events(tmp_path, g) > before[g.sr_id] for g in games))
                assert runs.alive() and len(_open_rows(ids)) == 2
                time.sleep(2 * lsettings.listener_worker_lease_seconds)  # leases outlive a full term
                assert runs.alive() and len(_open_rows(ids)) == 2
                assert restarted == []  # the reaper judged nobody dead
        finally:
            services.shutdown_all()
            runs.join(10)
            services.close()
    assert monitor.max_open == 1
    assert all(getattr(runs.results[m], "exit_code", None) == 14 for m in ids)  # ended by the shutdown


def test_postgresql_going_away_mid_game_keeps_listeners_streaming_until_their_row_deadline(
    sim, make_match, settings, redis_client, tmp_path, monkeypatch
):
    games = _games(2)
    server = sim(games, write_status=False)
    matches = _matches(make_match, server, games, tmp_path, monkeypatch)
    ids = [str(m.id) for m in matches]
    lsettings = settings.model_copy(update={**QUICK_INTERVALS, "listener_heartbeat_stale_seconds": 12.0})
    coordination = CoordinationStore.from_settings(lsettings, client=redis_client)
    services = ListenerServices(settings=lsettings, coordination=coordination)
    proxy = FaultProxy(("127.0.0.1", 5432)).start()
    init_database(
        proxy.url_via(settings.database_url),
        connect_timeout_seconds=2,
        statement_timeout_seconds=settings.database_statement_timeout_seconds,
    )
    runs = Runs(settings=lsettings, coordination=coordination, services=services)
    try:
        for mid in ids:
            runs.start(mid)
        wait_for(lambda: len(_open_rows(ids)) == 2)
        wait_for(lambda: all(_events(tmp_path, g) > 0 for g in games))
        before = {g.sr_id: _events(tmp_path, g) for g in games}
        database.close()

        # A restart: connections cut, then refused for a few seconds, then back.
        proxy.refuse()
        down_at = time.monotonic()
        wait_for(lambda: _held() > 40)  # still streaming: the writer holds the messages meanwhile
        while time.monotonic() - down_at < 4.0:
            time.sleep(0.1)
        assert runs.alive()
        proxy.forward()
        (db_now,) = database.execute_sql("SELECT now()").fetchone()
        wait_for(lambda: all(r.heartbeat_at > db_now for r in _open_rows(ids)) and len(_open_rows(ids)) == 2)
        wait_for(lambda: all(_events(tmp_path, g) > before[g.sr_id] + 20 for g in games))  # written once back
        assert runs.alive()
        assert all(r.ended_at is None and r.exit_code is None for r in _open_rows(ids))
        database.close()

        # Gone for longer than the row deadline: each listener stops itself before it could go stale.
        proxy.refuse()
        runs.join(30)
        assert not any(t.is_alive() for t in runs.threads.values())
        wait_for(lambda: server.streams_open == 0)
        proxy.forward()
    finally:
        proxy.forward()
        services.shutdown_all()
        runs.join(10)
        services.close()
        init_database(
            settings.database_url,
            connect_timeout_seconds=settings.database_connect_timeout_seconds,
            statement_timeout_seconds=settings.database_statement_timeout_seconds,
        )
        proxy.stop()
    for mid in ids:
        result = runs.results[mid]
        assert result.exit_code == 16 and result.reason == ROW_UNWRITABLE, result
