"""The match event log: one row per distinct message whatever run brings it, fenced by the run's token,
and what jsonb cannot hold kept byte for byte."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg2
import pytest

from lifecycle.sql import rows
from listener.event_log import EventLog
from listener.ingest import PipelinedIngest
from listener.log_writer import LogWriter
from models import event_log
from models.db import database
from models.errors import FencedWrite
from models.start_messages import store_new_message_ids
from tests.waiting import wait_for


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


def test_a_pipelined_ingest_processes_each_new_message_once_in_order_and_only_once_it_is_logged(make_match):
    # The stream loop hands messages over without waiting; each is processed after its batch
    # committed, in the order read; a refused batch (a successor's token) is never processed.
    match = make_match("mlb", status="inprogress")
    record_id, token = _new_run(match)
    log = EventLog(
        match_id=str(match.id),
        writer=LogWriter(buffer_limit=1000, retry_seconds=0.05),
        record_id=record_id,
        fence_token=token,
    ).open()
    processed: list[str] = []
    unlogged: list[str] = []

    def process(messages: list[dict], keys: list[str] | None) -> None:
        assert keys is not None and len(keys) == len(messages)  # the watermark's (models.processed)
        held = {m["payload"]["event"]["id"] for m in event_log.messages_of(match.id)}
        for message in messages:
            event_id = message["payload"]["event"]["id"]
            processed.append(event_id)
            if event_id not in held:
                unlogged.append(event_id)

    with ThreadPoolExecutor(2) as pool:
        ingest = PipelinedIngest(log, process, pool=pool, limit=40, stop=threading.Event())
        ids = [f"e{i}" for i in range(300)]
        assert all(ingest.take(_atbat(i)) for i in ids)
        assert not ingest.take(_atbat("e7"))  # the run's index knows it: nothing to do
        assert ingest.drain(30)
        assert processed == ids and not unlogged

        _new_run(match)  # a successor takes the match over
        assert ingest.take(_atbat("late"))
        deadline = time.monotonic() + 30
        while ingest.failure is None and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(FencedWrite):
            ingest.check()
        assert ingest.drain(30)
    assert "late" not in processed
    assert "late" not in {m["payload"]["event"]["id"] for m in event_log.messages_of(match.id)}


def test_deferred_takes_reach_the_writer_as_one_ticket_at_a_flush_and_keep_their_order(make_match):
    # The stream loop takes a read's messages with ``defer`` and flushes before its next read: one
    # ticket per read; a backfill (take_all) and a drain flush first, so the order read is kept.
    match = make_match("mlb", status="inprogress")
    record_id, token = _new_run(match)
    writer = LogWriter(buffer_limit=1000, retry_seconds=0.05)
    log = EventLog(match_id=str(match.id), writer=writer, record_id=record_id, fence_token=token).open()
    submits: list[int] = []
    submit = writer.submit

    def counted(rows, on_done=None):
        submits.append(len(rows))
        return submit(rows, on_done=on_done)

    writer.submit = counted  # type: ignore[method-assign]
    processed: list[str] = []

    def process(messages: list[dict], keys: list[str] | None) -> None:
        processed.extend(m["payload"]["event"]["id"] for m in messages)

    with ThreadPoolExecutor(1) as pool:
        ingest = PipelinedIngest(log, process, pool=pool, limit=100, stop=threading.Event())
        assert all(ingest.take(_atbat(f"a{i}"), defer=True) for i in range(5))
        assert not ingest.take(_atbat("a1"), defer=True)  # the index knows it
        assert submits == [] and ingest.inflight == 5  # held by the run, counted in flight
        ingest.flush()
        assert submits == [5]
        ingest.take(_atbat("b0"), defer=True)
        assert ingest.take_all([_atbat("c0"), _atbat("c1")]) == 2  # the pending one goes first
        assert submits == [5, 1, 2]
        ingest.take(_atbat("d0"), defer=True)
        assert ingest.drain(30) and ingest.inflight == 0  # a drain flushes
        assert submits == [5, 1, 2, 1]
    assert processed == ["a0", "a1", "a2", "a3", "a4", "b0", "c0", "c1", "d0"]
    ids = [m["payload"]["event"]["id"] for m in event_log.messages_of(match.id)]
    assert ids == processed


@pytest.mark.parametrize("path", ["arrays", "staged"])
def test_a_writer_paused_before_its_commit_lets_go_of_its_match_row_after_the_idle_bound(
    path, make_match, db
):
    # A listener worker SIGSTOPped between its event log insert and the commit: the insert holds the
    # match row FOR SHARE, which a reaper's dispatch (the start's message id on the match row) and the
    # successor's fencing token wait for. PostgreSQL ends the paused session after the idle bound,
    # whichever way the batch went (a small one's arrays, a large one's COPY into the staging table).
    match = make_match("mlb", status="inprogress")
    row = event_log.NewRow(str(match.id), "event:paused", "live", '{"payload": {}}')
    paused = psycopg2.connect(db)
    try:
        cursor = paused.cursor()
        if path == "arrays":
            params = {
                "match": [row.match_id],
                "key": [row.message_key],
                "kind": [row.kind],
                "message": [row.message],
                "raw": [None],
                "record": [None],
                "token": [None],
            }
            cursor.execute(event_log._LOG_ARRAYS, params)  # executed, never committed
        else:
            cursor.execute(event_log._STAGE)
            cursor.copy_expert(event_log._COPY, event_log._copy_lines([row]))
            cursor.execute(event_log._LOG_STAGED)  # executed, never committed
        pid = paused.get_backend_pid()

        def ended() -> bool:
            try:
                alive = database.execute_sql(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()
            finally:
                database.close()
            return alive is None

        wait_for(ended, timeout=60, interval=0.2, what="PostgreSQL ending the paused writer's session")
        with ThreadPoolExecutor(1) as pool:  # the dispatch's write of the match row goes through
            assert pool.submit(store_new_message_ids, [str(match.id)]).result(timeout=30)
    finally:
        paused.close()


def _held_writer() -> tuple[LogWriter, threading.Event]:
    """A writer whose batches wait for the returned event before PostgreSQL sees them."""
    writer = LogWriter(buffer_limit=1000, retry_seconds=0.05)
    release = threading.Event()
    write = writer._write

    def held(batch):  # type: ignore[no-untyped-def]
        release.wait(60)
        write(batch)

    writer._write = held  # type: ignore[method-assign]
    return writer, release


def test_a_marker_is_handed_to_the_writer_without_waiting_and_a_refusal_is_learnt_after(make_match):
    # A gap marker is written on a stream's reader thread, which serves other streams: it must not
    # wait for PostgreSQL. Held, it is still written (close waits for it), and a newer run's token
    # refusing it raises at the log's next flush.
    match = make_match("mlb", status="inprogress")
    record_id, token = _new_run(match)
    writer, release = _held_writer()
    log = EventLog(
        match_id=str(match.id), writer=writer, record_id=record_id, fence_token=token, wait_seconds=30
    ).open()
    with ThreadPoolExecutor(1) as pool:  # a wait for PostgreSQL would wait out the log's 30 s
        pool.submit(log.append_marker, "gap", cause="silence", seconds=12.5).result(timeout=20)
    assert not release.is_set() and len(log.pending) == 1 and not log.pending[0].done.is_set()
    release.set()
    log.close()
    assert [r.kind for page in event_log.pages_of(match.id) for r in page] == ["marker"]

    writer, release = _held_writer()
    stale = EventLog(
        match_id=str(match.id), writer=writer, record_id=record_id, fence_token=token, wait_seconds=30
    ).open()
    stale.append_marker("delay", status="delayed")
    _new_run(match)  # a successor takes the match's fencing token meanwhile
    release.set()
    wait_for(lambda: all(t.done.is_set() for t in stale.pending), timeout=30, what="the marker written")
    with pytest.raises(FencedWrite):
        stale.maybe_flush()
