"""The event log's batch insert (models.event_log.insert_events) by either way to PostgreSQL, COPY into
the session's staging table (a big batch) or the statement's array parameters (a small one): the
same rows, the same order, one copy of each message, the same fence."""

from __future__ import annotations

import json
import threading
import uuid

import peewee
import psycopg2
import pytest

from config.errors import DatabaseUnavailable
from lifecycle.sql import rows as lifecycle_rows
from listener.log_writer import LogWriter
from models import event_log
from models.db import connection_scope, database, init_database
from models.event_log import NewRow, insert_events
from models.fence import take_token
from tests.waiting import wait_for

#: The two ways a batch reaches PostgreSQL: the smallest batch sent by COPY.
WAYS = {"copy": 1, "arrays": 10**9}


@pytest.fixture(params=sorted(WAYS))
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(event_log, "COPY_FROM", WAYS[request.param])
    return request.param


def _run(match) -> tuple[str, int]:
    record_id = str(uuid.uuid4())
    token = lifecycle_rows.create_row(
        record_id=record_id, match_id=str(match.id), message_id=None, dry_run=False
    )
    return record_id, token


def _row(
    match,
    key: str,
    message: str,
    *,
    run: tuple[str, int] | None = None,
    raw: bytes | None = None,
    kind: str = "live",
) -> NewRow:
    record_id, token = run if run is not None else (None, None)
    return NewRow(
        match_id=str(match.id),
        message_key=event_log.key_text(("event", key)),
        kind=kind,
        message=message,
        raw=raw,
        record_id=record_id,
        fence_token=token,
    )


def test_a_batch_is_logged_in_order_byte_for_byte_each_message_once_and_a_stale_run_refused(make_match, way):
    one, two = make_match("mlb", status="inprogress"), make_match("mlb", status="inprogress")
    stale = _run(two)
    current = _run(two)  # ``stale`` is no longer the newest run of ``two``
    assert insert_events([_row(one, "before", '{"n": 0}')]).logged  # already logged: not again
    # What COPY's text format escapes (a backslash, a tab and a newline between JSON tokens), non-ASCII
    # text, bytes kept as received, and no record id or token at all.
    tricky = '{"text":\t"a\\\\b \\"q\\" \\t é ⚽",\n"n": 1}'
    batch = [
        _row(one, "tricky", tricky),
        _row(one, "before", '{"n": 2}'),
        _row(two, "new", '{"n": 3}', run=current),
        _row(one, "kept", '{"kickoff": {"unreadable": "bytes"}}', raw=b"\x00\xff\\\t\n", kind="unreadable"),
        _row(two, "late", '{"n": 4}', run=stale),
        _row(one, "tricky", '{"n": "second copy in the batch"}'),
        _row(two, "last", '{"n": 5}', run=current),
    ]
    outcome = insert_events(batch)

    key = event_log.key_text
    assert outcome.logged == {
        (str(one.id), key(("event", "tricky"))),
        (str(two.id), key(("event", "new"))),
        (str(one.id), key(("event", "kept"))),
        (str(two.id), key(("event", "last"))),
    }
    assert outcome.refused == {(str(two.id), key(("event", "late")))}

    rows_one = [r for page in event_log.pages_of(one.id) for r in page]
    assert [r.message for r in rows_one[1:]] == [json.loads(tricky), {"kickoff": {"unreadable": "bytes"}}]
    kept = rows_one[2]
    assert kept.kind == "unreadable" and kept.record_id is None and kept.fence_token is None
    with connection_scope():
        (raw,) = database.execute_sql(
            "SELECT raw FROM match_events WHERE match_id = %s AND seq = %s", (str(one.id), kept.seq)
        ).fetchone()
    assert bytes(raw) == b"\x00\xff\\\t\n"
    rows_two = [r for page in event_log.pages_of(two.id) for r in page]
    assert [r.message["n"] for r in rows_two] == [3, 5]
    assert {(r.record_id, r.fence_token) for r in rows_two} == {current}
    # One batch, one order: the rows' arrival numbers follow the batch.
    seqs = {r.message.get("n", "raw"): r.seq for r in rows_one[1:] + rows_two}
    assert seqs[1] < seqs[3] < seqs["raw"] < seqs[5]

    assert not insert_events(batch).logged  # the whole batch again: every message is there already


def test_a_successor_takes_its_token_only_after_a_batch_in_flight_committed(make_match, way):
    match = make_match("mlb", status="inprogress")
    run = _run(match)
    batch = [_row(match, f"e{n}", json.dumps({"n": n}), run=run) for n in range(5)]
    logged = threading.Event()
    release = threading.Event()
    outcomes = []

    def writer() -> None:  # the batch's transaction stays open until ``release``
        with connection_scope(), database.atomic():
            outcomes.append(insert_events(batch))
            logged.set()
            release.wait(60)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert logged.wait(60)
        refused = pytest.raises(peewee.OperationalError, match="lock timeout")
        with connection_scope(), refused, database.atomic():
            database.execute_sql("SET LOCAL lock_timeout = '100ms'")
            take_token(str(match.id))  # the batch holds the match row's share lock
    finally:
        release.set()
        thread.join(60)
    assert len(outcomes[0].logged) == 5

    with connection_scope(), database.atomic():
        newer = take_token(str(match.id))
    assert newer == run[1] + 1
    late = insert_events([_row(match, "late", '{"n": 9}', run=run)])
    assert late.refused and not late.logged
    assert event_log.log_summary(match.id).events == 5


@pytest.mark.parametrize(
    "key",
    [
        ("event", "137fcdd2-8466-52e9-8fd5-962fc4c007db", "upsert", "2026-12-04T19:21:26.832895+00:00"),
        ("message", 'é ⚽ "q" \\ \n \t \x00 \x7f \u2028 \ud83d'),
        ("event", 7, "delete", None),
    ],
)
def test_a_message_key_is_written_as_every_earlier_version_wrote_it(key):
    # The key table holds this text: a different spelling of the same identity would log it twice.
    assert event_log.key_text(key) == json.dumps(list(key), separators=(",", ":"))


def test_postgresql_lost_during_a_copy_is_unavailable_so_the_writer_holds_the_batch(
    db, make_match, monkeypatch
):
    # The writer holds a batch through an outage only when the store says "unavailable": a connection
    # lost under COPY (the driver's own call, not a statement) must say so too.
    match = make_match("mlb", status="inprogress")
    batch = [_row(match, f"e{n}", json.dumps({"n": n})) for n in range(event_log.COPY_FROM)]
    lines = event_log._copy_lines

    def lines_then_cut(rows):
        out = lines(rows)
        (pid,) = database.execute_sql("SELECT pg_backend_pid()").fetchone()
        with psycopg2.connect(db) as admin, admin.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return out

    monkeypatch.setattr(event_log, "_copy_lines", lines_then_cut)
    with pytest.raises(DatabaseUnavailable):
        insert_events(batch)
    monkeypatch.setattr(event_log, "_copy_lines", lines)
    assert len(insert_events(batch).logged) == len(batch)  # the next batch reconnects


def test_an_idle_writer_gives_its_connection_back_so_more_writers_than_the_pool_all_write(db, make_match):
    # A writer holds one connection while submits come and gives it back once idle: a quiet listener
    # process holds none, and writers made one after another never exhaust the process's pool.
    match = make_match("mlb", status="inprogress")
    database.close()
    init_database(db, pool_max_connections=2, connect_timeout_seconds=30)
    try:
        for n in range(4):
            writer = LogWriter(buffer_limit=10, retry_seconds=0.05)
            ticket = writer.submit([_row(match, f"w{n}", json.dumps({"n": n}))])
            assert ticket.wait(60) and not ticket.dropped and ticket.logged, f"writer {n} did not write"
        wait_for(lambda: database.in_use() == 0, timeout=60, what="every idle writer gave its connection")
    finally:
        database.close()
        init_database(db)


def _counting_batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of each batch the writer commits (the real insert, counted)."""
    from listener import log_writer

    batches: list[int] = []
    real = log_writer.insert_events

    def counted(rows):
        batches.append(len(rows))
        return real(rows)

    monkeypatch.setattr(log_writer, "insert_events", counted)
    return batches


def test_a_small_batch_lingers_so_many_quiet_streams_messages_share_one_commit(db, make_match, monkeypatch):
    # Issue 34's fleet: a thousand quiet streams each hand over one message at a time; without the linger
    # each became a commit of its own (491 commits/s for 500 events/s). Submits made within the linger of
    # the first go in the first's batch.
    batches = _counting_batches(monkeypatch)
    matches = [make_match("mlb", status="inprogress") for _ in range(3)]
    writer = LogWriter(buffer_limit=100, retry_seconds=0.05, linger_seconds=5.0)
    first = writer.submit([_row(matches[0], "q0", json.dumps({"n": 0}))])
    assert not first.wait(1.0), "a lone message was committed before its linger passed"
    tickets = [first] + [
        writer.submit([_row(matches[n % 3], f"q{n}", json.dumps({"n": n}))]) for n in range(1, 12)
    ]
    for ticket in tickets:
        assert ticket.wait(60) and not ticket.dropped and len(ticket.logged) == 1
    assert batches == [12]


def test_a_batch_that_fills_ends_the_linger_and_a_lone_one_waits_only_the_linger(db, make_match, monkeypatch):
    batches = _counting_batches(monkeypatch)
    match = make_match("mlb", status="inprogress")
    # a linger far longer than the wait below: only a full batch can end it in time
    full = LogWriter(buffer_limit=100, retry_seconds=0.05, batch_rows=5, linger_seconds=600.0)
    first = full.submit([_row(match, "f0", json.dumps({"n": 0}))])
    assert not first.wait(1.0), "a lone message was committed before its linger passed"
    tickets = [first] + [full.submit([_row(match, f"f{n}", json.dumps({"n": n}))]) for n in range(1, 5)]
    assert all(ticket.wait(60) for ticket in tickets), "a full batch waited out its linger"
    assert batches == [5]
    # a lone message is committed once its linger passed, with nothing more coming
    lone = LogWriter(buffer_limit=100, retry_seconds=0.05, linger_seconds=0.2)
    ticket = lone.submit([_row(match, "lone", json.dumps({"n": "lone"}))])
    assert ticket.wait(60) and ticket.logged == {event_log.key_text(("event", "lone"))}
    assert batches == [5, 1]
