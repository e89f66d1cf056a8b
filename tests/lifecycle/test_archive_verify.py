"""verify-archive and backfill outside a listener, against a local play-by-play server (real services)."""

from __future__ import annotations

import json
import uuid
from urllib.parse import urlsplit

import pytest

from cli.matches import verification_lines
from harness.ports import free_port
from lifecycle.archive_verify import backfill_match_archive, verify_match_archive
from lifecycle.cleanup import sweep_stale_match_listeners
from listener.archive import archive_path
from listener.events import current_events
from listener.play_by_play import play_by_play_url
from models.event_log import messages_of
from models.listener_record import MatchListenerRecord
from models.match import Match
from tests.lifecycle.helpers import dead_run
from tests.logged import event_log_of


def _message(sr_id: str, event: dict, operation: str = "create") -> dict:
    return {
        "payload": {"game": {"id": sr_id}, "event": event},
        "metadata": {"match": f"sd:match:{sr_id}", "operation": operation},
    }


def _archive(settings, match, events: list[dict]):
    """Log ``events`` as a listener run would (unfenced), into the match's event log."""
    event_log_of(match.id, [_message(match.sr_id, event) for event in events]).close()
    return match.id


@pytest.fixture
def pbp(static_feed, lsettings, monkeypatch):
    """``pbp(match, events)``: serve the match's play-by-play and point SPORTRADAR_BASE_URL at it."""

    def serve(match, events: list[dict]):
        path = urlsplit(play_by_play_url(lsettings, league=match.league.name, sr_id=match.sr_id)).path
        base = static_feed({path: {"game": {"id": match.sr_id, "status": "closed"}, "events": events}})
        monkeypatch.setenv("SPORTRADAR_BASE_URL", base)
        return lsettings.model_copy(update={"sportradar_base_url": base})

    return serve


def _closed_port() -> str:
    return f"http://127.0.0.1:{free_port()}"


A1 = {"id": "a", "updated_at": "2026-01-01T00:00:01Z"}
A2 = {"id": "a", "updated_at": "2026-01-01T00:00:09Z"}
B = {"id": "b", "updated_at": "2026-01-01T00:00:02Z"}
C = {"id": "c", "updated_at": "2026-01-01T00:00:03Z"}


def test_verify_lists_missing_extra_and_differing_and_stores_the_outcome(make_match, lsettings, pbp, kick):
    match = make_match(status="closed")
    _archive(lsettings, match, [A1, B])
    settings = pbp(match, [A2, C])

    result = verify_match_archive(match.sr_id, settings=settings)

    assert (result.ok, result.verification.missing, result.verification.extra) == (False, ["c"], ["b"])
    assert result.verification.differing == ["a"] and result.verification.events == 2
    row = Match.get_by_id(match.id)
    assert row.archive_verified_at is not None
    assert row.archive_verification == {
        "ok": False,
        "events": 2,
        "missing": ["c"],
        "missing_count": 1,
        "extra": ["b"],
        "extra_count": 1,
        "differing": ["a"],
        "differing_count": 1,
    }
    text = kick("matches", "verify-archive", str(match.id), code=1).output
    assert "1 missing, 1 extra, 1 differing" in text and "missing: c" in text and "extra: b" in text
    doc = json.loads(kick("matches", "verify-archive", match.sr_id, "--json", code=1).stdout)
    assert doc == {"ok": False, "missing": ["c"], "extra": ["b"], "differing": ["a"], "events": 2}


def test_an_agreeing_archive_exits_0_and_a_match_without_logged_events_is_an_empty_archive(
    make_match, lsettings, pbp, kick
):
    agreeing, absent = make_match(status="closed"), make_match(status="closed")
    _archive(lsettings, agreeing, [A1, B])
    pbp(agreeing, [A1, B])
    assert "archive ok" in kick("matches", "verify-archive", str(agreeing.id)).output
    assert Match.get_by_id(agreeing.id).archive_verification["ok"] is True

    settings = pbp(absent, [A1, B])
    result = verify_match_archive(str(absent.id), settings=settings)
    assert result.verification.missing == ["a", "b"] and not result.ok


def test_an_unreachable_play_by_play_exits_5_naming_the_setting_and_stores_nothing(
    make_match, lsettings, kick, monkeypatch
):
    match = make_match(status="closed")
    monkeypatch.setenv("SPORTRADAR_BASE_URL", _closed_port())
    result = kick("matches", "verify-archive", str(match.id), "--json", code=5)
    assert result.stdout == "" and "SPORTRADAR_BASE_URL" in result.stderr
    assert "test-api-key" not in result.output
    assert Match.get_by_id(match.id).archive_verified_at is None


def test_an_unusable_play_by_play_is_its_own_error(make_match, lsettings, static_feed, kick, monkeypatch):
    match = make_match(status="closed")
    monkeypatch.setenv("SPORTRADAR_BASE_URL", static_feed({}))  # 404 for every path
    result = kick("matches", "backfill", str(match.id), code=5)
    assert "HTTP 404" in result.stderr and "SPORTRADAR_BASE_URL" in result.stderr


def test_backfill_merges_what_the_archive_lacks_then_verifies(
    make_match, lsettings, lcoordination, pbp, kick
):
    match = make_match(status="closed")
    path = _archive(lsettings, match, [A1])
    settings = pbp(match, [A2, B, C])

    result = backfill_match_archive(str(match.id), settings=settings, coordination=lcoordination)

    assert result.ok and result.backfilled == 3
    held = current_events(messages_of(path))
    assert list(held) == ["a", "b", "c"] and held["a"]["payload"]["event"] == A2
    assert Match.get_by_id(match.id).archive_verification["ok"] is True
    assert lcoordination.locks.start_lock_holder(match.id) is None  # the backfill's own lock is released
    doc = json.loads(kick("matches", "backfill", str(match.id), "--json").stdout)
    assert doc["ok"] is True and doc["backfilled"] == 0 and doc["events"] == 3


def test_backfill_refuses_while_a_listener_may_own_the_archive(
    make_match, lsettings, lcoordination, pbp, kick
):
    match = make_match(status="closed")
    pbp(match, [A1])
    MatchListenerRecord.create(id=uuid.uuid4(), match=match.id)  # open row
    assert "open lifecycle row" in kick("matches", "backfill", str(match.id), code=4).stderr
    MatchListenerRecord.update(ended_at=match.scheduled, exit_code=14).execute()
    lcoordination.locks.start_lock(match.id).acquire("some-run")
    assert "start lock is held" in kick("matches", "backfill", str(match.id), code=4).stderr
    assert lcoordination.locks.start_lock_holder(match.id) == "some-run"
    assert not archive_path(lsettings.data_dir, "nfl", match.sr_id).exists()


def test_the_sweep_enqueues_one_backfill_per_closed_game_whose_run_it_abandoned(
    make_match, lsettings, lcoordination
):
    closed, live = make_match(status="closed"), make_match(status="inprogress")
    dead_run(closed, lcoordination)
    dead_run(closed, lcoordination, hold_lock=False)
    dead_run(live, lcoordination)
    sent: list[str] = []

    result = sweep_stale_match_listeners(
        settings=lsettings, coordination=lcoordination, send_backfill=sent.append
    )

    assert result.abandoned == 3 and sent == [str(closed.id)] and result.backfills == [str(closed.id)]
    assert not result.set_aside


def test_a_backfill_the_broker_refuses_is_set_aside_and_the_sweep_still_cleans(
    make_match, lsettings, lcoordination
):
    from config.errors import BrokerUnavailable

    match = make_match(status="complete")
    dead_run(match, lcoordination)

    def refuse(match_id: str) -> None:
        raise BrokerUnavailable(service="the broker", setting="BROKER_URL", address="x", reason="down")

    result = sweep_stale_match_listeners(settings=lsettings, coordination=lcoordination, send_backfill=refuse)

    assert result.abandoned == 1 and result.backfills == []
    [item] = result.set_aside
    assert (item.step, item.match_id) == ("enqueue_backfill", str(match.id)) and "BROKER_URL" in item.reason
    assert str(match.id) in result.barriers_cleared


def test_the_sweep_actor_sends_backfill_match_archive(make_match, lsettings, lcoordination, broker_queues):
    from actors.listeners import sweep_stale_match_listeners as sweep_actor

    match = make_match(status="closed")
    dead_run(match, lcoordination)
    assert sweep_actor.fn()["backfills"] == [str(match.id)]
    assert broker_queues("default") == 1


@pytest.mark.unit
def test_a_verification_reads_as_counts_then_ids():
    bad = {"ok": False, "events": 4, "missing": ["x", "y"], "extra": [], "differing": ["z"]}
    assert verification_lines(bad, match="m1") == [
        "match m1: archive NOT ok against the play-by-play (4 events): 2 missing, 0 extra, 1 differing",
        "  missing: x y",
        "  differing: z",
    ]
    good = {"ok": True, "events": 4, "missing": [], "extra": [], "differing": []}
    assert verification_lines(good, match="m1") == [
        "match m1: archive ok: it agrees with the play-by-play (4 events)"
    ]


def test_the_backfill_actor_leaves_a_match_a_listener_owns_to_it(make_match, lcoordination):
    from actors.archive import backfill_match_archive as actor

    match = make_match(status="closed")
    lcoordination.locks.start_lock(match.id).acquire("a-live-run")
    assert "start lock is held" in actor.fn(str(match.id))["refused"]
    assert lcoordination.locks.start_lock_holder(match.id) == "a-live-run"


def test_kickoff_listeners_sweep_sends_the_backfill_and_says_so(
    make_match, lcoordination, kick, broker_queues
):
    match = make_match(status="closed")
    dead_run(match, lcoordination)
    line = kick("listeners", "sweep").output
    assert f"archive backfill enqueued for {match.id}" in line
    assert broker_queues("default") == 1


def test_export_writes_the_specs_document_from_the_log_on_any_host_and_an_unknown_match_exits_2(
    make_match, lsettings, kick, tmp_path
):
    match = make_match(status="closed")
    _archive(lsettings, match, [A1, B, A2])
    out = tmp_path / "elsewhere" / "game.json"
    out.parent.mkdir()
    assert "3 messages" in kick("matches", "export", match.sr_id, "--out", str(out)).output
    lines = out.read_bytes().split(b"\n")
    assert lines[0] == b"[" and lines[-2] == b"]" and lines[2].startswith(b",")  # one message a line
    assert [m["payload"]["event"] for m in json.loads(out.read_bytes())] == [A1, B, A2]
    assert json.loads(kick("matches", "export", str(match.id), "--out", "-").stdout) == json.loads(
        out.read_text()
    )
    assert "no match" in kick("matches", "export", str(uuid.uuid4()), code=2).stderr.lower()
