"""Fencing at the data: once a newer run of a match took its token, every write of an older run is refused.

The pause window (a thread past ``may_write()`` when its process is paused past every lease)
is simulated by a ``may_write`` that always says True: only the store's fencing stops the
older run's archive flush, Match.status, question, verification, gap counts, heartbeat and close.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from lifecycle.sql import rows
from listener.archive import EventArchive, read_events
from listener.body import ListenerContext
from listener.exit_codes import ExitCode
from listener.pipeline import QuestionPipeline
from listener.verify import Verification
from listener.verify_store import record_verification
from models import Match, MatchListenerRecord, Question
from models.errors import FencedWrite
from models.event_log import log_summary
from srsim.script import GameScript
from tests.listener.conftest import start_listener
from tests.waiting import wait_for


def _atbat(event_id: str) -> dict:
    return {
        "payload": {"event": {"type": "atbat", "id": event_id, "hitter": {"full_name": "A. Hitter"}}},
        "metadata": {"operation": "create"},
    }


def _new_run(match) -> tuple[str, int]:
    record_id = str(uuid.uuid4())
    token = rows.create_row(record_id=record_id, match_id=str(match.id), message_id=None, dry_run=False)
    return record_id, token


def test_every_write_of_an_older_run_is_refused_once_a_newer_run_took_its_token(make_match, tmp_path):
    match = make_match("mlb", status="scheduled")
    mid = str(match.id)
    old_id, old = _new_run(match)
    path = tmp_path / "game.json"
    old_archive = EventArchive(path, match_id=mid, fence_token=old).open()
    old_archive.append({"payload": {"n": 1}})  # before any successor: written

    new_id, new = _new_run(match)  # the successor starts (the older run is "paused")
    assert new > old and Match.get_by_id(mid).fence_token == new
    new_archive = EventArchive(path, match_id=mid, fence_token=new).open()

    # The older run wakes up past its may_write() check: the store refuses each of its writes.
    with pytest.raises(FencedWrite):
        old_archive.append({"payload": {"n": 2}})
    with pytest.raises(FencedWrite):
        Match.get_by_id(mid).apply_stream("inprogress", fence_token=old)
    old_pipeline = QuestionPipeline(
        match_id=mid, settings=None, db_gate=threading.Semaphore(), fence_token=old
    )
    with pytest.raises(FencedWrite):
        old_pipeline.process(_atbat("old-atbat"))
    with pytest.raises(FencedWrite):
        record_verification(mid, Verification(missing=[], extra=[], differing=[], events=1), fence_token=old)
    assert rows.heartbeat_rows([old_id, new_id]) == {new_id}
    assert rows.fenced_rows([old_id, new_id]) == {old_id}
    assert rows.close_row(old_id, exit_code=0, reason="old run") is False

    # The newer run's writes go through.
    new_archive.append({"payload": {"n": 3}})
    assert Match.get_by_id(mid).apply_stream("inprogress", fence_token=new) == "inprogress"
    QuestionPipeline(match_id=mid, settings=None, db_gate=threading.Semaphore(), fence_token=new).process(
        _atbat("new-atbat")
    )
    record_verification(mid, Verification(missing=[], extra=[], differing=[], events=1), fence_token=new)
    old_archive.close()
    new_archive.close()

    assert read_events(path) == [{"payload": {"n": 1}}, {"payload": {"n": 3}}]
    assert [q.key for q in Question.select().where(Question.match == mid)] == ["atbat:new-atbat"]
    stored = Match.get_by_id(mid)
    assert stored.status == "inprogress" and stored.archive_verified_at is not None
    assert MatchListenerRecord.get_by_id(old_id).ended_at is None  # the sweep's to close, not the old run's
    assert rows.close_row(new_id, exit_code=0, reason="done") is True


def test_a_listener_whose_may_write_still_says_true_stops_fenced_when_a_successor_takes_the_archive(
    sim, listener_settings, make_match
):
    game = GameScript(
        sr_id=str(uuid.uuid4()), league="mlb", start_after=0.2, event_count=400, event_interval=0.02
    )
    match = make_match("mlb", sr_id=game.sr_id, status="scheduled")
    mid = str(match.id)
    settings = listener_settings(
        sportradar_base_url=sim([game]).base_url, listener_archive_flush_events=1, listener_backfill=False
    )
    old_id, old = _new_run(match)
    ctx = ListenerContext(
        match_id=mid,
        record_id=old_id,
        is_test=False,
        settings=settings,
        may_write=lambda: True,
        fence_token=old,
    )
    out = start_listener(ctx)
    wait_for(lambda: log_summary(mid).events >= 3, timeout=20)

    _new_run(match)  # the successor's token: from its commit on, PostgreSQL refuses the older run
    held = log_summary(mid).events

    assert out.thread is not None
    out.thread.join(20)
    assert not out.thread.is_alive()
    assert out.code == ExitCode.CANCELLED
    assert out.listener.exit_reason.startswith("fenced"), out.listener.exit_reason
    assert log_summary(mid).events == held  # nothing the older run wrote after the successor's token
    assert held < game.total_events
