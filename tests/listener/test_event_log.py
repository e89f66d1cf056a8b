"""The match event log: one row per distinct message whatever run brings it, fenced by the run's token,
and what jsonb cannot hold kept byte for byte."""

from __future__ import annotations

import uuid

import pytest

from config.errors import FencedWrite
from lifecycle.sql import rows
from listener.event_log import EventLog
from listener.log_writer import LogWriter
from models import event_log


def _atbat(event_id: str, **extra: object) -> dict:
    return {
        "payload": {"event": {"type": "atbat", "id": event_id, **extra}},
        "metadata": {"operation": "create"},
    }


def _new_run(match) -> tuple[str, int]:
    record_id = str(uuid.uuid4())
    token = rows.create_row(record_id=record_id, match_id=str(match.id), message_id=None, dry_run=False)
    return record_id, token


def _log(match, record_id: str | None, token: int | None) -> EventLog:
    writer = LogWriter(buffer_limit=100, retry_seconds=0.05)
    return EventLog(match_id=str(match.id), writer=writer, record_id=record_id, fence_token=token).open()


def test_each_distinct_message_is_logged_once_across_runs_and_an_older_run_is_fenced(make_match):
    match = make_match("mlb", status="inprogress")
    old_id, old = _new_run(match)
    first = _log(match, old_id, old)
    assert first.record(_atbat("a")) and first.record(_atbat("b"))
    assert not first.record(_atbat("a"))  # the index knows it

    new_id, new = _new_run(match)
    second = _log(match, new_id, new)
    assert second.count == 2  # what the earlier run logged, on any host
    replay = {**_atbat("b"), "replay": True, "kickoff": {"backfilled": "resume"}}
    assert not second.record(replay)  # the same message: not logged again
    assert second.record({**_atbat("c"), "kickoff": {"backfilled": "play_by_play"}})

    with pytest.raises(FencedWrite):  # the older run wakes up: PostgreSQL refuses its insert
        first.record(_atbat("d"))
    stale = _log(match, old_id, old)
    stale.index = type(stale.index)()  # even a run that never saw "a" cannot add a second copy
    with pytest.raises(FencedWrite):
        stale.record(_atbat("a"))

    logged = event_log.messages_of(match.id)
    assert [m["payload"]["event"]["id"] for m in logged] == ["a", "b", "c"]
    assert logged[2]["kickoff"]["backfilled"] == "play_by_play"
    assert [r.kind for page in event_log.pages_of(match.id) for r in page] == ["live", "live", "backfilled"]


def test_an_unfenced_log_ignores_duplicates_from_a_cold_index(make_match):
    match = make_match("mlb", status="inprogress")
    one, two = _log(match, None, None), _log(match, None, None)
    assert one.record(_atbat("x"))
    assert not two.record(_atbat("x"))  # the unique key, not the index, decides
    assert event_log.log_summary(match.id).events == 1


def test_a_nul_and_an_unreadable_line_are_kept_byte_for_byte(make_match):
    match = make_match("mlb", status="inprogress")
    log = _log(match, None, None)
    assert log.record(_atbat("n", text="a\x00b"))
    log.record_unreadable(b"\xff\xfe{not json", "invalid UTF-8")
    rows_ = [r for page in event_log.pages_of(match.id) for r in page]
    assert rows_[0].message["payload"]["event"]["text"] == "a\x00b"
    assert rows_[1].kind == "unreadable" and rows_[1].message["kickoff"]["bytes"] == 11
    assert [m["payload"]["event"]["id"] for m in event_log.messages_of(match.id)] == ["n"]
