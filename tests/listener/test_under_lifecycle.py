"""MatchListener as the default listener_body under the real start path (row, lock, heartbeats, stop)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from lifecycle import guarded_start
from lifecycle.runtime import ListenerServices
from listener.exit_codes import ExitCode
from models import MatchListenerRecord
from models.coordination import CoordinationStore
from models.event_log import messages_of
from srsim.script import GameScript
from tests import intervals
from tests.lifecycle.helpers import start
from tests.waiting import wait_for


@pytest.fixture
def services(settings, redis_client):
    lsettings = settings.model_copy(
        update=intervals.fields(
            "in_process", "listener_heartbeat_interval_seconds", "listener_stop_poll_seconds"
        )
    )
    coordination = CoordinationStore.from_settings(lsettings, client=redis_client)
    svc = ListenerServices(settings=lsettings, coordination=coordination)
    yield lsettings, coordination, svc
    svc.shutdown_all()
    time.sleep(0.05)
    svc.close()


def _start_settings(server, tmp_path, monkeypatch) -> dict:
    """The feed and the data directory in the worker's environment; the run's own knobs stored."""
    monkeypatch.setenv("SPORTRADAR_BASE_URL", server.base_url)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    return {
        "listener_status_reload_heartbeats": 4,
        "listener_archive_flush_seconds": 0.0,
    }


def _game_and_match(
    sim, make_match, tmp_path, monkeypatch, *, is_test=True, sim_kwargs=None, run=None, **script
):
    """An mlb GameScript (``script``) served by srsim, and its match pointed at it: (game, server, match)."""
    game = GameScript(sr_id=str(uuid.uuid4()), league="mlb", **script)
    server = sim([game], **(sim_kwargs or {}))
    match = make_match(
        "mlb",
        sr_id=game.sr_id,
        is_test=is_test,
        listener_start_settings={**_start_settings(server, tmp_path, monkeypatch), **(run or {})},
    )
    return game, server, match


def test_a_start_runs_the_default_body_to_exit_13_and_closes_the_row(
    sim, services, make_match, tmp_path, monkeypatch
):
    settings, coordination, svc = services
    game, _, match = _game_and_match(
        sim, make_match, tmp_path, monkeypatch, start_after=0.5, event_interval=0.03, event_count=12
    )
    result = start(match, settings=settings, coordination=coordination, services=svc)
    assert result.exit_code == ExitCode.NOT_IN_PROGRESS and result.success
    [row] = MatchListenerRecord.select().where(MatchListenerRecord.match == match.id)
    assert row.exit_code == 13 and row.ended_at is not None
    archive = tmp_path / "data" / "listener" / "mlb" / f"{game.sr_id}.json"
    assert len([e for e in messages_of(match.id) if "payload" in e]) == 12  # the event log, not a file
    assert not archive.exists()
    assert archive.with_name(f"{game.sr_id}.{str(row.id)[:8]}.log").exists()


def test_an_operator_stop_ends_the_default_body_with_15(sim, services, make_match, tmp_path, monkeypatch):
    settings, lcoordination, svc = services
    _, server, match = _game_and_match(  # no traffic at all: the body is blocked in recv
        sim,
        make_match,
        tmp_path,
        monkeypatch,
        sim_kwargs={"heartbeat_seconds": 30},
        start_after=60,
        event_count=3,
    )
    results = []
    t = threading.Thread(
        target=lambda: results.append(
            guarded_start.start_match_listener(
                str(match.id),
                None,
                False,
                message_id=None,
                settings=settings,
                coordination=lcoordination,
                services=svc,
            )
        ),
        daemon=True,
    )
    t.start()
    wait_for(lambda: server.streams_open > 0, timeout=10, what="the listener's stream")
    lcoordination.stops.set_stop_flag(match.id, ttl_seconds=30)
    t.join(20)  # the feed's next byte, a heartbeat, is 30 s away: only the stop can end the run sooner
    assert not t.is_alive()
    assert results[0].exit_code == ExitCode.STOPPED


@pytest.mark.parametrize("is_test", [False, True], ids=["live-no-row", "is_test-writes-its-row"])
def test_a_dry_run_writes_no_row_except_for_is_test_and_a_live_one_still_writes_match_status(
    is_test, sim, services, make_match, tmp_path, monkeypatch
):
    """Decision: a dry run skips the lifecycle row only; a live match's status still follows the stream."""
    from models import Match

    settings, coordination, svc = services
    _, _, match = _game_and_match(
        sim,
        make_match,
        tmp_path,
        monkeypatch,
        is_test=is_test,
        run={"listener_dry_run": True},
        start_after=0.3,
        event_interval=0.03,
        event_count=8,
    )
    result = start(match, settings=settings, coordination=coordination, services=svc)
    assert result.exit_code == ExitCode.NOT_IN_PROGRESS and result.success
    rows = list(MatchListenerRecord.select().where(MatchListenerRecord.match == match.id))
    if is_test:
        [row] = rows
        assert row.dry_run is True and row.exit_code == 13 and result.record_id == str(row.id)
        assert Match.get_by_id(match.id).status == "closed"  # srsim's write, not the stream's
    else:
        assert rows == [] and result.record_id is None
        assert Match.get_by_id(match.id).status == "complete"  # the stream's write, dry run or not
